// The glossary calls of tests/app/test_deepl_glossaries.py made with deepl-node: prints what it got as JSON.
// Usage: node deepl_node_glossaries.js SERVER_URL KEY
const deepl = require('deepl-node');

const [url, key] = process.argv.slice(2);

(async () => {
  const translator = new deepl.Translator(key, { serverUrl: url, maxRetries: 0 });
  const out = {};
  const entries = new deepl.GlossaryEntries({ entries: { file: 'fichero', house: 'casa grande' } });
  const made = await translator.createGlossary('node', 'en', 'es', entries);
  out.made = [made.name, made.sourceLang, made.targetLang, made.entryCount, made.ready];
  out.listed = (await translator.listGlossaries()).some((g) => g.glossaryId === made.glossaryId);
  out.entries = (await translator.getGlossaryEntries(made)).entries();
  out.translated = (await translator.translateText('Open the file.', 'en', 'es', { glossary: made })).text;
  out.pairs = (await translator.getGlossaryLanguagePairs()).map((p) => [p.sourceLang, p.targetLang]);
  await translator.deleteGlossary(made);
  try {
    await translator.getGlossary(made.glossaryId);
    out.deleted = 'still there';
  } catch (e) {
    out.deleted = e.constructor.name;
  }
  console.log(JSON.stringify(out));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
