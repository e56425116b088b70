// The API reference at /docs: Scalar's renderer (docs-scalar.js, copied from the pinned
// @scalar/api-reference package by scripts/build) on this deployment's own /openapi.json.
// Nothing is loaded from another origin: no web fonts, no proxy, no telemetry, no MCP or
// registry links, no AI agent (the page's Content-Security-Policy, in _headers, forbids them anyway).
"use strict";
(function () {
  // "Try it" sends its requests to this deployment. On a local run (scripts/dev) the OAuth
  // client credentials flow is filled in with the demo institution's client, whose secret is
  // public (README, edge-api/seed/demo-credentials.json) and which exists only in the local
  // demo data; a deployment's page leaves the fields empty.
  var local = /^(127\.0\.0\.1|localhost|\[::1\])$/.test(location.hostname);
  var authentication = { preferredSecurityScheme: "oauth2" };
  if (local) {
    authentication.securitySchemes = {
      oauth2: {
        flows: {
          clientCredentials: {
            "x-scalar-client-id": "cli_demo_northwind",
            clientSecret: "sk_live_STWHmccuqJOlqc0xSilXUIi_RVJ5RCQC0eP4oOoWNCo",
            selectedScopes: ["transactions:read", "merchants:read"],
          },
        },
      },
    };
  }
  // The mount point is #reference, never #api-reference (see docs.html): the standalone
  // script would mount an unconfigured second reference over that id.
  Scalar.createApiReference("#reference", {
    url: "/openapi.json",
    // A document's own settings (agent, mcp below) are looked up by its slug: name it.
    slug: "payrail",
    title: "Payrail API",
    servers: [{ url: location.origin, description: local ? "This local worker" : "This deployment" }],
    authentication: authentication,
    withDefaultFonts: false,
    telemetry: false,
    hideClientButton: false,
    showDeveloperTools: "never",
    documentDownloadType: "json",
    // Both would be offered on a local run (Scalar turns them on for localhost): "Ask AI" sends
    // the document to Scalar's service, the MCP links point at its hosted tools.
    agent: { disabled: true },
    mcp: { disabled: true },
    persistAuth: false,
    defaultOpenAllTags: true,
    expandAllResponses: true,
    hideDarkModeToggle: true,
    forceDarkModeState: "light",
    metaData: { title: "Payrail API reference" },
  });
})();
