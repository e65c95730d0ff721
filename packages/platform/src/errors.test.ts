import { AppError, ErrorCode, errorCatalog, isUnavailableError } from './errors';

/** An error the way pg raises it (SQLSTATE in `code`), wrapped the way Drizzle wraps it. */
function pgError(code: string, message: string): Error {
  const driver = Object.assign(new Error(message), { code });
  return Object.assign(new Error(`Failed query: select $1\nparams: ${message}`), { cause: driver });
}

describe('isUnavailableError', () => {
  test('connection-level SQLSTATEs, wrapped or not', () => {
    expect(isUnavailableError(pgError('57P01', 'terminating connection due to administrator command'))).toBe(true);
    expect(isUnavailableError(pgError('08006', 'connection failure'))).toBe(true);
    expect(isUnavailableError(pgError('53300', 'sorry, too many clients already'))).toBe(true);
    expect(isUnavailableError(pgError('57P03', 'the database system is starting up'))).toBe(true);
    expect(isUnavailableError(pgError('55000', 'database "x" is not currently accepting connections'))).toBe(true);
  });

  test('any other SQLSTATE is not unavailability, whatever its message quotes', () => {
    expect(isUnavailableError(pgError('22P02', 'invalid input syntax: "connection terminated"'))).toBe(false);
    expect(isUnavailableError(pgError('23505', 'duplicate key value'))).toBe(false);
    expect(isUnavailableError(pgError('55000', 'object not in prerequisite state'))).toBe(false);
  });

  test("socket errors, ioredis's give-ups and Redis's not-now replies", () => {
    expect(
      isUnavailableError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(isUnavailableError(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))).toBe(true);
    expect(
      isUnavailableError(
        Object.assign(new Error('Reached the max retries per request limit'), { name: 'MaxRetriesPerRequestError' }),
      ),
    ).toBe(true);
    expect(isUnavailableError(new Error("READONLY You can't write against a read only replica."))).toBe(true);
    expect(isUnavailableError(new Error('LOADING Redis is loading the dataset in memory'))).toBe(true);
    expect(isUnavailableError(new Error('Connection is closed.'))).toBe(true);
    expect(isUnavailableError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isUnavailableError(new Error('timeout exceeded when trying to connect'))).toBe(true);
  });

  test('bugs stay bugs', () => {
    expect(isUnavailableError(new TypeError('Connection ended is not a function'))).toBe(false);
    expect(isUnavailableError(new Error('something else'))).toBe(false);
    expect(isUnavailableError(undefined)).toBe(false);
    expect(isUnavailableError('Connection is closed')).toBe(false);
  });
});

describe('errorCatalog', () => {
  test('retryable exactly where the moment failed, not the request: 429 and every 5xx', () => {
    for (const [code, info] of Object.entries(errorCatalog)) {
      expect({ code, retryable: info.retryable }).toEqual({
        code,
        retryable: info.status === 429 || info.status >= 500,
      });
      expect(info.meaning.length).toBeGreaterThan(10);
      expect(info.action.length).toBeGreaterThan(10);
    }
    expect(Object.keys(errorCatalog).sort()).toEqual(Object.values(ErrorCode).sort());
  });

  test('an AppError carries its status and retryable from the catalog; one error may override retryable', () => {
    expect(new AppError(ErrorCode.VALIDATION_ERROR, 'x')).toMatchObject({ statusCode: 422, retryable: false });
    expect(new AppError(ErrorCode.SERVICE_UNAVAILABLE, 'x')).toMatchObject({ statusCode: 503, retryable: true });
    expect(new AppError(ErrorCode.CONFLICT, 'still running', { retryable: true })).toMatchObject({
      statusCode: 409,
      retryable: true,
    });
  });
});
