// Type-checks every ```ts fragment of README.md against the SDK's sources
// (tsc --strict, no emit): each fragment becomes a module of its own, its
// imports hoisted and its statements in an async function, with the few
// names a fragment takes from the prose around it declared with their
// types. A fragment that no longer matches the SDK's API fails `npm test`.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "dist-check", "readme");

// The names fragments use without defining them, by what they stand for.
const given = `
declare const client: import("agentreach").Client;
declare const agent: import("agentreach").Agent;
declare const deadJobId: string;
declare const rawBody: string;
declare const req: import("node:http").IncomingMessage;
declare const request: Request;
declare const http: typeof import("node:http");
declare function ocr(url: string, o: { signal: AbortSignal }): Promise<string>;
declare function transcode(payload: unknown, signal: AbortSignal): Promise<void>;
declare const generateText: typeof import("ai").generateText;
declare const model: Parameters<typeof import("ai").generateText>[0]["model"];
`;

const readme = readFileSync(join(root, "README.md"), "utf8");
const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
if (!blocks.length) throw new Error("README.md has no ts fragment");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
blocks.forEach((code, i) => {
  const lines = code.split("\n");
  const imports = lines.filter((l) => l.startsWith("import "));
  const body = lines.filter((l) => !l.startsWith("import "));
  // A fragment that defines a name the prose gives shadows the declaration, in its function.
  writeFileSync(join(out, `fragment${i + 1}.ts`), `${imports.join("\n")}\n${given}\nexport async function fragment${i + 1}(): Promise<void> {\n${body.join("\n")}\n}\n`);
});
writeFileSync(
  join(out, "tsconfig.json"),
  JSON.stringify({
    extends: "../../tsconfig.json",
    compilerOptions: {
      noEmit: true,
      outDir: "../../dist-check/readme-out",
      noUnusedLocals: false,
      baseUrl: "../..",
      rootDir: "../..",
      paths: { agentreach: ["./src/index.ts"], "agentreach/*": ["./src/*.ts"] },
    },
    include: ["./*.ts"],
  }),
);
try {
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(out, "tsconfig.json")], { stdio: "inherit" });
} catch {
  console.error(`README.md's ts fragments do not type-check against the SDK (files in ${out})`);
  process.exit(1);
}
console.log(`README.md: ${blocks.length} ts fragments type-check against the SDK`);
