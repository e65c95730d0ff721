// `npm run lint` (after `tsc`): typescript-eslint's type-aware recommended rules plus an import-cycle check,
// over the same files as `tsc -p tsconfig.json` (one TypeScript program, so lint and type check agree).
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const TESTS = ['test/**/*.ts', '**/*.test.ts'];

export default tseslint.config(
  // Plain JS (jest config, reporter, dev script) is outside tsconfig.json, so outside the type-aware lint.
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      'packages/db/drizzle/**',
      'packages/client/generated/**',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs',
    ],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      // Resolves `@mailroom/<package>/<module>` through tsconfig.json `paths` to the packages' sources.
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'import-x/no-cycle': 'error',
      // The send worker is read through a closure built before it exists (`let worker!: Worker`).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // A leading underscore marks a parameter or binding that is there on purpose (Express's 4-argument
      // error handler, a field dropped from a rest spread).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: TESTS,
    rules: {
      // supertest's `res.body` and parsed fixtures are `any` by design; the `expect`s are the type check.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Stubs and fakes implement async interfaces (SES handlers, sources, hooks) without awaiting anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // A Plunk database dump is foreign JSON: its rows are `Record<string, any>` and mapped field by field.
    files: ['packages/plunk-import/src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
);
