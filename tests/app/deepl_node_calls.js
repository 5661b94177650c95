// The calls of tests/app/test_deepl.py made with the official Node client, deepl-node: prints what it got as JSON.
// Usage: node deepl_node_calls.js SERVER_URL KEY DIR (DIR holds a.docx and a.po; translations are written beside).
const deepl = require('deepl-node');
const path = require('path');

const [url, key, dir] = process.argv.slice(2);
const TEXTS = ['The house is big.', 'Good morning. Where is the station?'];
const HTML = '<p>The house is <b>big</b>.</p>';

(async () => {
  const translator = new deepl.Translator(key, { serverUrl: url, maxRetries: 0 });
  const out = {};
  out.sources = (await translator.getSourceLanguages()).map((l) => l.code);
  out.targets = (await translator.getTargetLanguages()).map((l) => l.code);
  const before = (await translator.getUsage()).character;
  const one = await translator.translateText(TEXTS[0], null, 'es');
  out.one = [one.text, one.detectedSourceLang, one.billedCharacters];
  out.list = (await translator.translateText(TEXTS, 'en', 'es')).map((r) => r.text);
  out.html = (await translator.translateText(HTML, null, 'es', { tagHandling: 'html' })).text;
  const after = (await translator.getUsage()).character;
  out.usage = [after.count - before.count, after.limit];
  for (const name of ['a.docx', 'a.po']) {
    const status = await translator.translateDocument(path.join(dir, name), path.join(dir, `node-${name}`), null, 'es');
    out[name] = status.done();
  }
  try {
    await new deepl.Translator('wrong-key', { serverUrl: url, maxRetries: 0 }).translateText('x', null, 'es');
    out.wrong = 'accepted';
  } catch (e) {
    out.wrong = e.constructor.name;
  }
  console.log(JSON.stringify(out));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
