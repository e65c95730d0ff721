import { isReplicaFailure, replicaName } from './replicas';

describe('read replicas (no server)', () => {
  test('a replica is named host:port/database, never with its credentials', () => {
    expect(replicaName('postgres://reader:s3cret@replica-1.internal:6432/mailroom?sslmode=require')).toBe(
      'replica-1.internal:6432/mailroom',
    );
    expect(replicaName('postgresql://replica-2/mailroom')).toBe('replica-2:5432/mailroom');
  });

  test('connection failures and recovery conflicts are retried on the primary; query errors are not', () => {
    const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
    const wrapped = (cause: Error) => Object.assign(new Error('Failed query: select …'), { cause });
    expect(
      isReplicaFailure(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5433'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(isReplicaFailure(wrapped(new Error('Connection terminated unexpectedly')))).toBe(true);
    expect(isReplicaFailure(wrapped(pgError('57P01', 'terminating connection due to administrator command')))).toBe(
      true,
    );
    expect(isReplicaFailure(wrapped(pgError('57P03', 'the database system is starting up')))).toBe(true);
    expect(isReplicaFailure(wrapped(pgError('40001', 'canceling statement due to conflict with recovery')))).toBe(true);
    expect(isReplicaFailure(wrapped(pgError('40001', 'could not serialize access due to concurrent update')))).toBe(
      false,
    );
    expect(isReplicaFailure(wrapped(pgError('57014', 'canceling statement due to statement timeout')))).toBe(false);
    expect(isReplicaFailure(wrapped(pgError('42P01', 'relation "contacts" does not exist')))).toBe(false);
  });
});
