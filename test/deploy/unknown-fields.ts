/**
 * Unknown fields in Kubernetes objects, found offline: the validators of `kubernetes-models` accept any extra
 * property (Kubernetes's OpenAPI schemas do not forbid them), while an API server drops or, under strict field
 * validation, refuses them. This walks each object beside the TypeScript interface the same packages declare for
 * its kind (their `.d.ts`, read with the TypeScript compiler), so a misspelt field (`readinessprobe`,
 * `maxUnavailble`) is reported with its path.
 *
 * Free-form parts (maps such as labels and data, `object`-typed fields) are not judged.
 */
import path from 'node:path';
import ts from 'typescript';

/** `apiVersion/kind` → the module and interface that declare it. */
export type KindTypes = Record<string, { module: string; name: string }>;

/** A checker for objects of the given kinds. */
export function unknownFieldChecker(kinds: KindTypes, root: string): (object: { apiVersion: string; kind: string }) => string[] {
  const entries = Object.entries(kinds);
  const virtual = path.join(root, 'test', 'deploy', '__kind_types__.ts');
  const source = [
    ...entries.map(([, t], i) => `import type { ${t.name} as T${i} } from '${t.module}';`),
    `export interface Kinds { ${entries.map(([k], i) => `${JSON.stringify(k)}: T${i};`).join(' ')} }`,
  ].join('\n');
  const options: ts.CompilerOptions = { strict: true, noEmit: true, skipLibCheck: true, moduleResolution: ts.ModuleResolutionKind.Node10, module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, types: [] };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (file, language, ...rest) => (path.resolve(file) === virtual ? ts.createSourceFile(file, source, language) : getSourceFile(file, language, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (file) => path.resolve(file) === virtual || fileExists(file);
  const program = ts.createProgram([virtual], options, host);
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(virtual)!;
  const kindsSymbol = checker.getSymbolAtLocation((file.statements.find(ts.isInterfaceDeclaration) as ts.InterfaceDeclaration).name)!;
  const kindsType = checker.getDeclaredTypeOfSymbol(kindsSymbol);
  const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === virtual);
  if (diagnostics.length > 0) throw new Error(`kind types do not resolve: ${ts.flattenDiagnosticMessageText(diagnostics[0].messageText, '\n')}`);

  const walk = (value: unknown, type: ts.Type, at: string, out: string[]): void => {
    if (value === null || typeof value !== 'object') return;
    let t = checker.getNonNullableType(type);
    if (t.isUnion()) {
      // IntOrString and the like: only a union with one object member says which fields an object may have.
      const objects = t.types.filter((m) => (m.flags & ts.TypeFlags.Object) !== 0);
      if (objects.length !== 1) return;
      t = objects[0];
    }
    if (Array.isArray(value)) {
      const element = checker.isArrayType(t) ? checker.getTypeArguments(t as ts.TypeReference)[0] : undefined;
      if (element) value.forEach((v, i) => walk(v, element, `${at}[${i}]`, out));
      return;
    }
    const index = checker.getIndexInfosOfType(t);
    if (index.length > 0) {
      for (const [k, v] of Object.entries(value)) walk(v, index[0].type, `${at}.${k}`, out);
      return;
    }
    const properties = checker.getPropertiesOfType(t);
    if (properties.length === 0) return; // `object`, `any`: free-form
    for (const [k, v] of Object.entries(value)) {
      const property = t.getProperty(k);
      if (!property) out.push(`${at}.${k}`);
      else walk(v, checker.getTypeOfSymbol(property), `${at}.${k}`, out);
    }
  };

  return (object) => {
    const key = `${object.apiVersion}/${object.kind}`;
    const property = kindsType.getProperty(key);
    if (!property) throw new Error(`no declared type for ${key}`);
    const out: string[] = [];
    walk(object, checker.getTypeOfSymbol(property), object.kind, out);
    return out;
  };
}
