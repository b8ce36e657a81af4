// Bundles src/ into VEMU_WEB_OUT (default dist/): index.html, app.js, app.css.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';

const out = process.env.VEMU_WEB_OUT || 'dist';
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome110', 'firefox110', 'safari16'],
  outdir: out,
  logLevel: 'warning',
  legalComments: 'none',
});
copyFileSync('src/index.html', `${out}/index.html`);
