/**
 * docs/self-hosting/configuration.md: every environment variable, from the configuration slices themselves (the
 * TSDoc of each slice's `…Config` interface: one declaration per setting). A property's comment starts with
 * `` `NAME`: what it does `` (or lists several as `` - `NAME`: … `` lines); `@process` (api, worker, cli) and `@group`
 * (required, shared, api, worker, tuning) are read from the property, else from its interface; `@default` overrides
 * the default found in the text ("default X").
 *
 * @module
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { GENERATED_NOTICE } from './notice';

const ROOT = path.resolve(__dirname, '..', '..');

/** One documented variable. */
export interface ConfigVariable {
  name: string;
  description: string;
  /** The default as the slice states it, or undefined (unset). */
  default: string | undefined;
  processes: string[];
  group: ConfigGroup;
  /** The slice file (relative to the repository). */
  source: string;
}

/** The groups of the document, in order. */
export const CONFIG_GROUPS = {
  required: ['Required in production', 'Set these for any real deployment; the defaults only suit a development machine.'],
  shared: ['Shared', 'Read by the API and the worker alike.'],
  api: ['API', 'Read by the API process only.'],
  worker: ['Worker', "The worker's behaviour."],
  smtp: ['SMTP relay', 'Read by the SMTP relay process only (`npm run start:smtp`).'],
  tuning: ['Tuning', 'Sizes, intervals and limits; the defaults suit most deployments.'],
} as const;
export type ConfigGroup = keyof typeof CONFIG_GROUPS;

/** The configuration slice files: each package's `src/config.ts` and the app slices of `@mailroom/config`. */
export function configSliceFiles(): string[] {
  const files: string[] = [];
  for (const pkg of readdirSync(path.join(ROOT, 'packages')).sort()) {
    const file = path.join(ROOT, 'packages', pkg, 'src', 'config.ts');
    if (existsSync(file) && pkg !== 'config') files.push(file);
  }
  const own = path.join(ROOT, 'packages', 'config', 'src');
  for (const f of readdirSync(own).sort()) if (f.endsWith('-config.ts')) files.push(path.join(own, f));
  return files;
}

const tagText = (tag: ts.JSDocTag): string => (typeof tag.comment === 'string' ? tag.comment : ts.getTextOfJSDocComment(tag.comment) ?? '').trim();

function tagOf(node: ts.Node, name: string): string | undefined {
  const tag = ts.getJSDocTags(node).find((t) => t.tagName.text === name);
  return tag ? tagText(tag) : undefined;
}

function commentOf(node: ts.Node): string {
  const doc = ts.getJSDocCommentsAndTags(node).find(ts.isJSDoc);
  const c = doc?.comment;
  return (typeof c === 'string' ? c : ts.getTextOfJSDocComment(c) ?? '').replace(/\{@link ([^}|]+)(\|[^}]*)?\}/g, '`$1`');
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();

/** The default stated in a description: "default X" (up to `,` `;` `)`), or a sentence "Default: X." */
function statedDefault(description: string): string | undefined {
  const sentence = /\bDefault: (.+?)\.(?: |$)/.exec(description);
  if (sentence) return sentence[1];
  const phrase = /\bdefault:? (`[^`]+`(?: [^,;)]*)?|[^,;)]+)/i.exec(description);
  return phrase ? phrase[1].trim().replace(/[.:]$/, '') : undefined;
}

/** The variables one property documents. */
function variablesOf(text: string): Array<{ name: string; description: string }> {
  const bullets = [...text.matchAll(/^- `([A-Z][A-Z0-9_]+)`: ([\s\S]*?)(?=^- `|\n\n|$(?![\s\S]))/gm)];
  if (bullets.length > 0) return bullets.map((m) => ({ name: m[1], description: oneLine(m[2]) }));
  const lead = /^`([A-Z][A-Z0-9_]+)`:? ?([\s\S]*)$/.exec(text.trim());
  return lead ? [{ name: lead[1], description: oneLine(lead[2]) }] : [];
}

/** Every variable the slices document, in slice order. @throws Error on a property of a slice without any. */
export function configVariables(): ConfigVariable[] {
  const out: ConfigVariable[] = [];
  for (const file of configSliceFiles()) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    for (const stmt of source.statements) {
      if (!ts.isInterfaceDeclaration(stmt) || !stmt.name.text.endsWith('Config')) continue;
      for (const member of stmt.members) {
        if (!ts.isPropertySignature(member)) continue;
        const vars = variablesOf(commentOf(member));
        if (vars.length === 0) throw new Error(`${path.relative(ROOT, file)}: ${stmt.name.text}.${member.name.getText()} names no variable in its TSDoc`);
        const processes = (tagOf(member, 'process') ?? tagOf(stmt, 'process') ?? '').split(/[\s,]+/).filter(Boolean);
        const group = (tagOf(member, 'group') ?? tagOf(stmt, 'group')) as ConfigGroup;
        if (!(group in CONFIG_GROUPS)) throw new Error(`${path.relative(ROOT, file)}: ${stmt.name.text}.${member.name.getText()} has no @group`);
        for (const v of vars) {
          out.push({ ...v, default: tagOf(member, 'default') ?? statedDefault(v.description), processes, group, source: path.relative(ROOT, file) });
        }
      }
    }
  }
  return out;
}

const cell = (s: string) => s.replace(/\|/g, '\\|');

/** docs/self-hosting/configuration.md's text. */
export function configurationMarkdown(): string {
  const vars = configVariables();
  const sections = (Object.keys(CONFIG_GROUPS) as ConfigGroup[]).map((group) => {
    const [title, intro] = CONFIG_GROUPS[group];
    const rows = vars
      .filter((v) => v.group === group)
      .map((v) => `| \`${v.name}\` | ${v.default ? cell(v.default.includes('`') ? v.default : `\`${v.default}\``) : '(unset)'} | ${v.processes.join(', ')} | ${cell(v.description)} |`);
    return `## ${title}\n\n${intro}\n\n| Variable | Default | Read by | Description |\n| --- | --- | --- | --- |\n${rows.join('\n')}\n`;
  });
  return `# Configuration

${GENERATED_NOTICE('the configuration slices (the `…Config` interfaces of packages/*/src/config.ts and packages/config/src/*-config.ts)')}

Every process reads its settings from environment variables once, at start, and refuses to start with a message
naming the variable when one is malformed. Nothing else reads the environment. The API, the worker and the CLI
(\`npm run cli\`) read the same variables; the table says which process uses each.

${sections.join('\n')}`;
}
