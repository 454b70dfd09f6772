// Encodes documents as transformers does (tokenizer(text).input_ids), with Hugging Face's tokenizers library itself:
// its Node.js binding, which carries the Rust library. Usage: node hf_tokenizers_encode.js TOKENIZER_JSON [--decode]
// Reads a JSON array of strings on stdin; prints a JSON array of their ids (special tokens as the file's template
// adds them). With --decode, prints [ids, texts]: also each document's text as the library gives it back from its
// ids without the template's special tokens (transformers' decode(tokenizer(text, add_special_tokens=False)
// .input_ids)).
// Run by hf_tokenizer_reference.py with NODE_PATH at the package's folder.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const tokenizer = Tokenizer.fromFile(process.argv[2]);
  const decode = process.argv[3] === '--decode';
  const documents = JSON.parse(fs.readFileSync(0, 'utf8'));
  const ids = [];
  const texts = [];
  for (const text of documents) {
    ids.push((await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds());
    if (decode) {
      const plain = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
      texts.push(await tokenizer.decode(plain, false));
    }
  }
  process.stdout.write(JSON.stringify(decode ? [ids, texts] : ids) + '\n');
}

main().catch((error) => {
  process.stderr.write(`hf_tokenizers_encode: ${error.message}\n`);
  process.exit(1);
});
