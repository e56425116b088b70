//! The D1 meter (`PAYRAIL_METER=1`, used by `scripts/bench`): off, answers carry no
//! `Payrail-D1`; on, it counts a known request's D1 work from D1's own meta.

use payrail_tests::Worker;

/// The `Payrail-D1` counts of a reply, by name.
fn counts(header: &str) -> std::collections::BTreeMap<String, f64> {
    header
        .split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a number")))
        .collect()
}

#[test]
fn the_meter_reports_only_when_switched_on_and_counts_a_token_as_one_batch() {
    let off = Worker::shared();
    let reply = off.token_form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &off.credentials.institutions[0].client_id),
        (
            "client_secret",
            &off.credentials.institutions[0].client_secret,
        ),
    ]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("payrail-d1"),
        None,
        "the meter is off by default"
    );

    let on = Worker::start_with_vars("sandbox", 3600, &[("PAYRAIL_METER", "1")]);
    let i = &on.credentials.institutions[0];
    let reply = on.token_form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &i.client_id),
        ("client_secret", &i.client_secret),
    ]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let token = counts(
        reply
            .header("payrail-d1")
            .expect("metered answers carry Payrail-D1"),
    );
    // Issuing a token is one batch (client check, throttle, token insert together).
    assert_eq!(token["trips"], 1.0, "{token:?}");
    assert!(token["statements"] >= 2.0, "{token:?}");
    assert!(token["rows_written"] >= 1.0, "{token:?}");
    assert!(token["size_after"] > 0.0, "{token:?}");
    // A request that touches no D1 counts nothing.
    let floor = on.send(on.request(reqwest::Method::GET, "/v1/no-such-route"), None);
    assert_eq!(floor.status, 404);
    let none = counts(floor.header("payrail-d1").expect("Payrail-D1 on a 404"));
    assert_eq!(none["trips"], 0.0, "{none:?}");
    assert_eq!(none["statements"], 0.0, "{none:?}");
}
