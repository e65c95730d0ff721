import { verifyEmails, type DnsLookup, type DomainDns } from './verify';

const receiving: DomainDns = {
  domainExists: true,
  mx: ['mx.example.net'],
  nullMx: false,
  implicitMx: false,
  hasWebsite: true,
};

/** A stub lookup from a table of answers (unknown domains do not exist), counting calls per domain. */
function stubLookup(answers: Record<string, DomainDns>) {
  const calls = new Map<string, number>();
  const lookup: DnsLookup = (domain) => {
    calls.set(domain, (calls.get(domain) ?? 0) + 1);
    return Promise.resolve(
      answers[domain] ?? { domainExists: false, mx: [], nullMx: false, implicitMx: false, hasWebsite: false },
    );
  };
  return { lookup, calls };
}

test('a batch asks once per domain and answers in input order', async () => {
  const { lookup, calls } = stubLookup({ 'example.net': receiving });
  const emails = ['a@example.net', 'b@example.net', 'not an address', 'c@nowhere.example', 'd@EXAMPLE.net'];
  const results = await verifyEmails(emails, lookup);
  expect(results.map((r) => [r.email, r.valid])).toEqual([
    ['a@example.net', true],
    ['b@example.net', true],
    ['not an address', false],
    ['c@nowhere.example', false],
    ['d@EXAMPLE.net', true],
  ]);
  expect(Object.fromEntries(calls)).toEqual({ 'example.net': 1, 'nowhere.example': 1 });
});

test('a null MX cannot receive; an unanswered lookup leaves the address valid and says why', async () => {
  const { lookup } = stubLookup({
    'null.example': { ...receiving, mx: [], nullMx: true },
    'slow.example': {
      domainExists: false,
      mx: [],
      nullMx: false,
      implicitMx: false,
      hasWebsite: false,
      error: 'timeout',
    },
  });
  const [nullMx, slow] = await verifyEmails(['x@null.example', 'x@slow.example'], lookup);
  expect(nullMx.valid).toBe(false);
  expect(nullMx.reasons.join(' ')).toMatch(/null MX/);
  expect(slow.valid).toBe(true);
  expect(slow.reasons.join(' ')).toMatch(/did not answer in time/);
});
