// prep_vs_hf_tokenizers.sh's peer: Hugging Face's tokenizers library (the Rust library, through its Node.js
// binding) encoding a JSON-lines corpus's "text" fields as transformers does, in batches (the library spreads a
// batch over every core). Usage: node hf_tokenizers_rate.js TOKENIZER_JSON CORPUS_JSONL
// Prints "DOCUMENTS TOKENS SECONDS", the time from before the tokenizer's load to the last batch's end.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const start = process.hrtime.bigint();
  const tokenizer = Tokenizer.fromFile(process.argv[2]);
  const texts = fs.readFileSync(process.argv[3], 'utf8').split('\n').filter((line) => line.length > 0)
    .map((line) => JSON.parse(line).text);
  let tokens = 0;
  for (let i = 0; i < texts.length; i += 1024) {
    const batch = await tokenizer.encodeBatch(texts.slice(i, i + 1024), { addSpecialTokens: true });
    for (const encoding of batch) tokens += encoding.getIds().length + 1;  // and the end of document
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  process.stdout.write(`${texts.length} ${tokens} ${seconds.toFixed(3)}\n`);
}

main().catch((error) => {
  process.stderr.write(`hf_tokenizers_rate: ${error.message}\n`);
  process.exit(1);
});
