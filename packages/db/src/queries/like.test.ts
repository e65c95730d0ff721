/** LIKE patterns from user text (`like.ts`): the pattern characters and the escape character are matched literally. */
import { likePattern } from './like';

test('plain text is wrapped per mode: contains, startsWith, endsWith', () => {
  expect(likePattern('ann')).toBe('%ann%');
  expect(likePattern('ann', 'contains')).toBe('%ann%');
  expect(likePattern('ann', 'startsWith')).toBe('ann%');
  expect(likePattern('ann', 'endsWith')).toBe('%ann');
});

test('%, _ and the escape character \\ are escaped, each on its own', () => {
  expect(likePattern('50%_off')).toBe('%50\\%\\_off%');
  expect(likePattern('a\\b')).toBe('%a\\\\b%');
  // An escape already in the text is escaped too: it cannot turn the pattern character after it literal twice.
  expect(likePattern('\\%')).toBe('%\\\\\\%%');
  expect(likePattern('__', 'startsWith')).toBe('\\_\\_%');
});

test('empty text matches everything (contains) and other characters pass through', () => {
  expect(likePattern('')).toBe('%%');
  expect(likePattern('é*?[]^$.(ü)', 'endsWith')).toBe('%é*?[]^$.(ü)');
});
