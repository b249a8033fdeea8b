// Drift check: regenerates the OpenAPI types into a temporary file and fails
// when they differ from the checked-in src/openapi.ts (run `npm run gen:types`).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const spec = join(root, "..", "..", "httpapi", "openapi.yaml");
const dir = mkdtempSync(join(tmpdir(), "agentreach-openapi-"));
const out = join(dir, "openapi.ts");
try {
  const bin = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  execFileSync(process.execPath, [bin, spec, "-o", out], { stdio: ["ignore", "ignore", "inherit"] });
  const want = readFileSync(out, "utf8");
  const have = readFileSync(join(root, "src", "openapi.ts"), "utf8");
  if (want !== have) {
    console.error("src/openapi.ts is out of date with httpapi/openapi.yaml: run `npm run gen:types` in sdk/typescript");
    process.exit(1);
  }
  console.log("src/openapi.ts matches httpapi/openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
