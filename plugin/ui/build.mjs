// Bundles the page's script and style sheet (src/) into dist/, minified, with no reference to
// anything outside the bundle: kubectl-ifo embeds them, and the page works offline.
import { build } from "esbuild";

await build({
  entryPoints: ["src/main.js", "src/style.css"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir: "dist",
  legalComments: "none",
  logLevel: "warning",
});
