// check.mjs parses TLA+ modules with the tree-sitter TLA+ grammar (wasm) and
// reports every ERROR and MISSING node, because TLC (Java) is not on the CI
// machines: this catches syntax drift, the Go checker in spec/ checks meaning.
//
// Usage: node check.mjs FILE.tla...
// Exit status: 0 when every file parses cleanly, 1 on a syntax error, 2 on misuse.
import Parser from 'web-tree-sitter';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node check.mjs FILE.tla...');
  process.exit(2);
}

const require = createRequire(import.meta.url);
await Parser.init();
const grammar = require.resolve('@tlaplus/tree-sitter-tlaplus/tree-sitter-tlaplus.wasm');
const parser = new Parser();
parser.setLanguage(await Parser.Language.load(grammar));

// problems walks the tree and lists ERROR and MISSING nodes; it descends only
// into subtrees that hold one, so a clean file costs one check.
function problems(node, out) {
  if (node.isMissing) {
    out.push({ node, what: `MISSING ${node.type}` });
  } else if (node.isError) {
    out.push({ node, what: 'ERROR' });
  }
  if (node.hasError) {
    for (const child of node.children) problems(child, out);
  }
  return out;
}

let failed = 0;
for (const file of files) {
  const source = readFileSync(file, 'utf8');
  const tree = parser.parse(source);
  const found = problems(tree.rootNode, []);
  for (const { node, what } of found) {
    const { row, column } = node.startPosition;
    const text = node.text.split('\n')[0].slice(0, 60);
    console.error(`${file}:${row + 1}:${column + 1}: ${what} near ${JSON.stringify(text)}`);
  }
  if (found.length > 0) {
    failed++;
  } else {
    console.log(`${file}: ok`);
  }
  tree.delete();
}
process.exit(failed > 0 ? 1 : 0);
