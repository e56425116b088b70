// @ts-check
// Lists today's paid transactions, every page.
//
//   PAYRAIL_API_URL=http://127.0.0.1:8787 PAYRAIL_CLIENT_ID=… PAYRAIL_CLIENT_SECRET=… \
//     node examples/paid-today.mjs
//
// (from sdk-typescript/, after `npm run build`; in your own project, `import { Payrail } from 'payrail'`
// works the same once the package is installed).

import { Payrail } from 'payrail';

const payrail = new Payrail({
  baseUrl: required('PAYRAIL_API_URL'),
  clientId: required('PAYRAIL_CLIENT_ID'),
  clientSecret: required('PAYRAIL_CLIENT_SECRET'),
});

// Midnight UTC today.
const today = new Date();
today.setUTCHours(0, 0, 0, 0);

let count = 0;
for await (const t of payrail.transactions.list({ status: 'paid', createdAfter: today, limit: 100 })) {
  count += 1;
  console.log(
    `${String(t.id).padStart(8)}  ${(t.external_reference ?? '-').padEnd(24)}  ${t.amount.gross ?? ''} ${t.currency ?? ''}`,
  );
}
console.log(`${count} paid today`);

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return value;
}
