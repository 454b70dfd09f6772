// Encodes documents as transformers does (tokenizer(text).input_ids), with Hugging Face's tokenizers library itself:
// its Node.js binding, which carries the Rust library. Usage: node hf_tokenizers_encode.js TOKENIZER_JSON
// Reads a JSON array of strings on stdin; prints a JSON array of their ids (special tokens as the file's template
// adds them). Run by hf_tokenizer_reference.py with NODE_PATH at the package's folder.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const tokenizer = Tokenizer.fromFile(process.argv[2]);
  const documents = JSON.parse(fs.readFileSync(0, 'utf8'));
  const ids = [];
  for (const text of documents) {
    ids.push((await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds());
  }
  process.stdout.write(JSON.stringify(ids) + '\n');
}

main().catch((error) => {
  process.stderr.write(`hf_tokenizers_encode: ${error.message}\n`);
  process.exit(1);
});
