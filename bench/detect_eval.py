"""How well does /detect tell languages apart, and what does `source: "auto"` do with the built-in en->es model?

    python -m bench.detect_eval

A small hand-written set (this project's own sentences): 6 languages (the served en and es, and de, fr, it, pt) x 4
lengths (1 word, 2-4 words, one sentence, two or three sentences) x 5 texts. Prints top-1 accuracy per length and
language, the mean confidence of right and wrong answers, and what "auto" into es does with each text: route as en
(right only for English) or refuse with 400 naming the detected language (right for the others).
"""

from __future__ import annotations

import statistics

from app.languages import Detector

LENGTHS = ("1 word", "2-4 words", "sentence", "2-3 sentences")
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


def auto_outcome(detector: Detector, text: str, language: str) -> str:
    """What source "auto" into es does with the text on an en->es server (the service routes the text when the
    detector finds it among the sources served into es, en alone, and refuses it otherwise)."""
    if detector.among(text, ["en"])["language"] != "en":
        return "refused (right)" if language != "en" else "refused (wrong)"
    return "routed en (right)" if language == "en" else "routed en (wrong)"


def main() -> None:
    detector = Detector().load()
    right: dict[str, list[bool]] = {n: [] for n in LENGTHS}
    by_language: dict[str, list[bool]] = {lang: [] for lang in SET}
    confidence: dict[bool, list[float]] = {True: [], False: []}
    outcomes: dict[str, int] = {}
    for language, groups in SET.items():
        for length, texts in zip(LENGTHS, groups, strict=True):
            for text in texts:
                best = detector.rank(text)[0]
                ok = best["language"] == language
                right[length].append(ok)
                by_language[language].append(ok)
                confidence[ok].append(best["confidence"])
                outcome = auto_outcome(detector, text, language)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
    total = sum(len(v) for v in right.values())
    print(f"{total} texts, {len(SET)} languages; py3langid over every language it knows")
    for length, oks in right.items():
        print(f"  {length:14s} top-1 accuracy {sum(oks) / len(oks):6.1%}  ({sum(oks)}/{len(oks)})")
    print("  " + ", ".join(f"{lang} {sum(v) / len(v):.0%}" for lang, v in by_language.items()))
    for ok, values in confidence.items():
        if values:
            label = "right" if ok else "wrong"
            print(f"  mean confidence of {label} answers: {statistics.mean(values):.1f}% ({len(values)} answers)")
    print('source "auto" into es on the en->es model:')
    for outcome, n in sorted(outcomes.items()):
        print(f"  {outcome:28s} {n}")


if __name__ == "__main__":
    main()
