"""Stage 8b: a phrasebook written for this project (training/phrasebook.tsv and the phrasebook_*.tsv files, the
later ones passed through `training.decontaminate` when written, plus sentence frames over word lists, translated
by hand with Spanish agreement) into work/phrasebook.*: greetings, directions, shops, food, time, family and
feelings, the everyday language that the catalogs and manuals lack. The everyday test phrases and the README
examples are held out here too: a line equal to one of them, or containing one of three or more words, is dropped
(the phrases people type first, `first_phrases.tsv`, in stage 9)."""

import itertools
import random
from pathlib import Path

from training.common import EVERYDAY, EVERYDAY2, WORK, read_tsv, write_lines
from training.corpus import key

HAND = Path(__file__).resolve().parent / "phrasebook.tsv"
MORE = Path(__file__).resolve().parent / "phrasebook_more.tsv"  # greetings to weather, written without the test sets
SPANISH = Path(__file__).resolve().parent / "phrasebook_es.tsv"  # what Spanish speakers type, thought in Spanish first
HOME = Path(__file__).resolve().parent / "phrasebook_home.tsv"  # daily life at home and with people (2026-11-28)
TOWN = Path(__file__).resolve().parent / "phrasebook_town.tsv"  # errands, time, weather, travel, work (2026-11-28)
SPANISH3 = Path(__file__).resolve().parent / "phrasebook_es3.tsv"  # thought in Spanish first, more verbs (2026-11-28)
# Written 2026-11-28 from a conversation phrasebook's topics alone, then decontaminated (training.decontaminate)
LATER = {name: Path(__file__).resolve().parent / f"phrasebook_{name}.tsv"
         for name in ("social", "about", "questions", "short", "es4", "statements",  # the second round
                      "es_life", "es_services", "es_short", "en_stories",  # the third
                      "r4_es_set", "r4_en_set", "r4_es_talk",  # the fourth: set phrases, talk
                      "r5_es_idiom", "r5_en_daily")}  # the fifth: Spanish idiom, English typed first  # fmt: skip
SEED = 7
M, F = "m", "f"

# (English, Spanish, gender)
PLACES = [
    ("hotel", "hotel", M), ("bus station", "estación de autobuses", F), ("train station", "estación de tren", F),
    ("bus stop", "parada de autobús", F), ("airport", "aeropuerto", M), ("beach", "playa", F),
    ("museum", "museo", M), ("market", "mercado", M), ("bank", "banco", M), ("hospital", "hospital", M),
    ("school", "escuela", F), ("church", "iglesia", F), ("park", "parque", M), ("library", "biblioteca", F),
    ("pharmacy", "farmacia", F), ("restaurant", "restaurante", M), ("supermarket", "supermercado", M),
    ("bakery", "panadería", F), ("post office", "oficina de correos", F), ("police station", "comisaría", F),
    ("cinema", "cine", M), ("theatre", "teatro", M), ("castle", "castillo", M), ("cathedral", "catedral", F),
    ("university", "universidad", F), ("town hall", "ayuntamiento", M), ("main square", "plaza mayor", F),
    ("bridge", "puente", M), ("port", "puerto", M), ("exit", "salida", F), ("entrance", "entrada", F),
    ("lift", "ascensor", M), ("kitchen", "cocina", F), ("garden", "jardín", M), ("office", "oficina", F),
    ("shop", "tienda", F), ("bookshop", "librería", F), ("petrol station", "gasolinera", F),
    ("car park", "aparcamiento", M), ("tourist office", "oficina de turismo", F), ("embassy", "embajada", F),
    ("swimming pool", "piscina", F), ("gym", "gimnasio", M), ("zoo", "zoo", M), ("stadium", "estadio", M),
    ("café", "cafetería", F), ("toilet", "baño", M), ("city centre", "centro de la ciudad", M),
    ("old town", "casco antiguo", M), ("hairdresser's", "peluquería", F), ("butcher's", "carnicería", F),
    ("underground station", "estación de metro", F), ("taxi rank", "parada de taxis", F),
]  # fmt: skip
THINGS = [
    ("key", "llave", F), ("phone", "teléfono", M), ("ticket", "billete", M), ("passport", "pasaporte", M),
    ("bag", "bolso", M), ("suitcase", "maleta", F), ("wallet", "cartera", F), ("book", "libro", M),
    ("car", "coche", M), ("bicycle", "bicicleta", F), ("umbrella", "paraguas", M), ("map", "mapa", M),
    ("glass", "vaso", M), ("cup", "taza", F), ("bottle", "botella", F), ("plate", "plato", M),
    ("knife", "cuchillo", M), ("fork", "tenedor", M), ("spoon", "cuchara", F), ("chair", "silla", F),
    ("table", "mesa", F), ("door", "puerta", F), ("window", "ventana", F), ("computer", "ordenador", M),
    ("shirt", "camisa", F), ("dress", "vestido", M), ("hat", "sombrero", M), ("coat", "abrigo", M),
    ("jacket", "chaqueta", F), ("watch", "reloj", M), ("pen", "bolígrafo", M), ("newspaper", "periódico", M),
    ("camera", "cámara", F), ("towel", "toalla", F), ("blanket", "manta", F), ("pillow", "almohada", F),
    ("charger", "cargador", M), ("lamp", "lámpara", F), ("box", "caja", F), ("letter", "carta", F),
    ("room", "habitación", F), ("house", "casa", F), ("bed", "cama", F), ("ball", "pelota", F),
    ("card", "tarjeta", F), ("jumper", "jersey", M), ("skirt", "falda", F), ("backpack", "mochila", F),
]  # fmt: skip
# adjective: (English, Spanish masculine, Spanish feminine, verb: ser for what a thing is, estar for its state)
ADJECTIVES = [
    ("new", "nuevo", "nueva", "es"), ("old", "viejo", "vieja", "es"), ("big", "grande", "grande", "es"),
    ("small", "pequeño", "pequeña", "es"), ("red", "rojo", "roja", "es"), ("black", "negro", "negra", "es"),
    ("white", "blanco", "blanca", "es"), ("blue", "azul", "azul", "es"), ("green", "verde", "verde", "es"),
    ("cheap", "barato", "barata", "es"), ("expensive", "caro", "cara", "es"), ("beautiful", "bonito", "bonita", "es"),
    ("broken", "roto", "rota", "está"), ("dirty", "sucio", "sucia", "está"), ("clean", "limpio", "limpia", "está"),
    ("ready", "listo", "lista", "está"),
]  # fmt: skip
# (English, Spanish, gender, countable plural)
FOOD = [
    ("bread", "pan", M, False), ("water", "agua", F, False), ("coffee", "café", M, False), ("tea", "té", M, False),
    ("milk", "leche", F, False), ("wine", "vino", M, False), ("beer", "cerveza", F, False),
    ("orange juice", "zumo de naranja", M, False), ("cheese", "queso", M, False), ("fish", "pescado", M, False),
    ("meat", "carne", F, False), ("chicken", "pollo", M, False), ("rice", "arroz", M, False),
    ("soup", "sopa", F, False), ("salad", "ensalada", F, False), ("fruit", "fruta", F, False),
    ("sugar", "azúcar", M, False), ("salt", "sal", F, False), ("chocolate", "chocolate", M, False),
    ("ice cream", "helado", M, False), ("pasta", "pasta", F, False), ("butter", "mantequilla", F, False),
    ("apples", "manzanas", F, True), ("oranges", "naranjas", F, True), ("eggs", "huevos", M, True),
    ("potatoes", "patatas", F, True), ("tomatoes", "tomates", M, True), ("bananas", "plátanos", M, True),
    ("strawberries", "fresas", F, True), ("grapes", "uvas", F, True), ("onions", "cebollas", F, True),
    ("vegetables", "verduras", F, True), ("biscuits", "galletas", F, True), ("olives", "aceitunas", F, True),
]  # fmt: skip
# (English, Spanish, gender) of people; names carry the gender of their greetings
FAMILY = [
    ("mother", "madre", F), ("father", "padre", M), ("brother", "hermano", M), ("sister", "hermana", F),
    ("son", "hijo", M), ("daughter", "hija", F), ("husband", "marido", M), ("wife", "mujer", F),
    ("grandmother", "abuela", F), ("grandfather", "abuelo", M), ("friend", "amigo", M), ("uncle", "tío", M),
    ("aunt", "tía", F), ("cousin", "primo", M), ("neighbour", "vecino", M), ("boss", "jefe", M),
    ("girlfriend", "novia", F), ("boyfriend", "novio", M),
]  # fmt: skip
NAMES = [("Maria", "María", F), ("John", "John", M), ("Peter", "Peter", M), ("Laura", "Laura", F),
         ("Carlos", "Carlos", M), ("Sofia", "Sofía", F), ("David", "David", M), ("Elena", "Elena", F),
         ("Miguel", "Miguel", M), ("Lucy", "Lucy", F), ("Tom", "Tom", M), ("Sarah", "Sarah", F),
         ("Mr Smith", "señor Smith", M), ("Mrs Brown", "señora Brown", F), ("doctor", "doctor", M),
         ("everyone", "a todos", M), ("my friend", "amigo mío", M), ("children", "niños", M)]  # fmt: skip
JOBS = [("teacher", "profesor", "profesora"), ("doctor", "médico", "médica"), ("nurse", "enfermero", "enfermera"),
        ("engineer", "ingeniero", "ingeniera"), ("lawyer", "abogado", "abogada"), ("cook", "cocinero", "cocinera"),
        ("waiter", "camarero", "camarera"), ("student", "estudiante", "estudiante"),
        ("writer", "escritor", "escritora"), ("driver", "conductor", "conductora"),
        ("farmer", "agricultor", "agricultora"), ("artist", "artista", "artista")]  # fmt: skip
CITIES = [("London", "Londres"), ("Madrid", "Madrid"), ("Paris", "París"), ("New York", "Nueva York"), ("Rome", "Roma"),
          ("Berlin", "Berlín"), ("Lisbon", "Lisboa"), ("Barcelona", "Barcelona"), ("Seville", "Sevilla"),
          ("Mexico City", "Ciudad de México"), ("Buenos Aires", "Buenos Aires"), ("Tokyo", "Tokio")]  # fmt: skip
COUNTRIES = [("Spain", "España"), ("France", "Francia"), ("Germany", "Alemania"), ("Italy", "Italia"),
             ("England", "Inglaterra"), ("Mexico", "México"), ("Argentina", "Argentina"), ("Brazil", "Brasil"),
             ("Japan", "Japón"), ("China", "China"), ("the United States", "Estados Unidos"), ("Portugal", "Portugal"),
             ("Ireland", "Irlanda"), ("Australia", "Australia"), ("Chile", "Chile"), ("Peru", "Perú")]  # fmt: skip
LANGUAGES = [("French", "francés"), ("German", "alemán"), ("Italian", "italiano"), ("Portuguese", "portugués"),
             ("Japanese", "japonés"), ("Chinese", "chino"), ("Spanish", "español"), ("English", "inglés"),
             ("Russian", "ruso"), ("Arabic", "árabe")]  # fmt: skip
DAYS = [("Monday", "lunes", "lunes"), ("Tuesday", "martes", "martes"), ("Wednesday", "miércoles", "miércoles"),
        ("Thursday", "jueves", "jueves"), ("Friday", "viernes", "viernes"), ("Saturday", "sábado", "sábados"),
        ("Sunday", "domingo", "domingos")]  # fmt: skip
NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
NUMEROS = ["una", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez", "once", "doce"]
AGES = [("five", "cinco"), ("eight", "ocho"), ("ten", "diez"), ("twelve", "doce"), ("fifteen", "quince"),
        ("eighteen", "dieciocho"), ("twenty", "veinte"), ("twenty-five", "veinticinco"), ("forty", "cuarenta"),
        ("fifty", "cincuenta"), ("sixty", "sesenta"), ("seventy", "setenta")]  # fmt: skip
# (English after "to", Spanish infinitive phrase)
ACTIVITIES = [
    ("eat", "comer"), ("sleep", "dormir"), ("go home", "ir a casa"), ("read", "leer"), ("dance", "bailar"),
    ("swim", "nadar"), ("travel", "viajar"), ("cook", "cocinar"), ("sing", "cantar"), ("rest", "descansar"),
    ("play football", "jugar al fútbol"), ("watch a film", "ver una película"), ("go to the beach", "ir a la playa"),
    ("buy a car", "comprar un coche"), ("visit the museum", "visitar el museo"), ("take a taxi", "tomar un taxi"),
    ("wait here", "esperar aquí"), ("pay", "pagar"), ("work tomorrow", "trabajar mañana"),
    ("go for a walk", "dar un paseo"), ("have dinner", "cenar"), ("have breakfast", "desayunar"),
    ("take a photo", "hacer una foto"), ("rent a car", "alquilar un coche"), ("change money", "cambiar dinero"),
    ("drink something", "beber algo"), ("see the sea", "ver el mar"), ("visit my family", "visitar a mi familia"),
    ("listen to music", "escuchar música"), ("write a letter", "escribir una carta"),
]  # fmt: skip
# (English subject, "to be" for a state, Spanish "estar", plural)
SUBJECTS = [("I", "am", "Estoy", False), ("You", "are", "Estás", False), ("He", "is", "Él está", False),
            ("She", "is", "Ella está", False), ("We", "are", "Estamos", True),
            ("They", "are", "Están", True)]  # fmt: skip
STATES = [("tired", "cansado"), ("busy", "ocupado"), ("sick", "enfermo"), ("ready", "listo"), ("bored", "aburrido"),
          ("worried", "preocupado"), ("angry", "enfadado"), ("lost", "perdido"), ("nervous", "nervioso"),
          ("at home", "en casa"), ("here", "aquí"), ("in the kitchen", "en la cocina")]  # fmt: skip
# English "I am X." -> Spanish "Tengo X." (tener + noun)
NEEDS = [("hungry", "hambre"), ("thirsty", "sed"), ("cold", "frío"), ("hot", "calor"), ("sleepy", "sueño"),
         ("afraid", "miedo")]  # fmt: skip


def the(es: str, g: str) -> str:
    """The Spanish noun with its definite article."""
    return f"{'el' if g == M or es == 'agua' else 'la'} {es}"


def a(es: str, g: str) -> str:
    """The Spanish noun with its indefinite article."""
    return f"{'un' if g == M else 'una'} {es}"


def an(en: str) -> str:
    """The English noun with a/an."""
    return f"{'an' if en[0] in 'aeiou' else 'a'} {en}"


def to_the(es: str, g: str) -> str:
    """'a' plus the definite article: al museo, a la playa."""
    return f"al {es}" if g == M else f"a la {es}"


def cap(text: str) -> str:
    """First letter upper-case, after any opening ¿ or ¡."""
    i = 1 if text[:1] in "¿¡" else 0
    return text[:i] + text[i].upper() + text[i + 1 :]


def places() -> list[tuple[str, str]]:
    """Directions and opening times."""
    out = []
    for en, es, g in PLACES:
        el, un, al, closed, open_ = the(es, g), a(es, g), to_the(es, g), "cerrado" if g == M else "cerrada", \
            "abierto" if g == M else "abierta"  # fmt: skip
        out += [
            (f"Where is the {en}?", f"¿Dónde está {el}?"),
            (f"Excuse me, where is the {en}?", f"Perdone, ¿dónde está {el}?"),
            (f"Is there {an(en)} near here?", f"¿Hay {un} cerca de aquí?"),
            (f"How do I get to the {en}?", f"¿Cómo llego {al}?"),
            (f"The {en} is near here.", cap(f"{el} está cerca de aquí.")),
            (f"The {en} is far from here.", cap(f"{el} está lejos de aquí.")),
            (f"The {en} is closed today.", cap(f"{el} está {closed} hoy.")),
            (f"Is the {en} open on Sundays?", f"¿Está {open_} {el} los domingos?"),
            (f"We are going to the {en}.", f"Vamos {al}."),
            (f"I am at the {en}.", f"Estoy en {el}."),
            (f"Let's meet at the {en}.", f"Nos vemos en {el}."),
            (f"I am looking for the {en}.", f"Busco {el}."),
            (f"The {en} is on the left.", cap(f"{el} está a la izquierda.")),
            (f"The {en} is on the right.", cap(f"{el} está a la derecha.")),
            (f"Is the {en} far?", f"¿Está lejos {el}?"),
        ]
    return out


def things(rng: random.Random) -> list[tuple[str, str]]:
    """Objects: looking for them, buying them, describing them (ser or estar, with agreement)."""
    out = []
    for en, es, g in THINGS:
        el, un, this, mine = the(es, g), a(es, g), "Este" if g == M else "Esta", "mío" if g == M else "mía"
        out += [
            (f"Where is my {en}?", f"¿Dónde está mi {es}?"),
            (f"I need {an(en)}.", f"Necesito {un}."),
            (f"Do you have {an(en)}?", f"¿Tiene {un}?"),
            (f"I have lost my {en}.", f"He perdido mi {es}."),
            (f"How much is the {en}?", f"¿Cuánto cuesta {el}?"),
            (f"This {en} is mine.", f"{this} {es} es {mine}."),
            (f"Give me the {en}, please.", f"Dame {el}, por favor."),
            (f"The {en} is in the kitchen.", cap(f"{el} está en la cocina.")),
            (f"I want to buy {an(en)}.", f"Quiero comprar {un}."),
        ]
        for adj, masc, fem, verb in rng.sample(ADJECTIVES, 3):
            out.append((f"The {en} is {adj}.", cap(f"{el} {verb} {masc if g == M else fem}.")))
            very_en, very_es = ("very ", "muy ") if verb == "es" else ("", "")  # "very broken" is not said
            out.append((f"My {en} is {very_en}{adj}.", f"Mi {es} {verb} {very_es}{masc if g == M else fem}."))
    return out


def food() -> list[tuple[str, str]]:
    """Shopping and eating."""
    out = []
    for en, es, g, plural in FOOD:
        el = (("los " if g == M else "las ") + es) if plural else the(es, g)
        like = "gustan" if plural else "gusta"
        good = {(M, False): "bueno", (F, False): "buena", (M, True): "buenos", (F, True): "buenas"}[g, plural]
        out += [
            (f"Where can I buy {en}?", f"¿Dónde puedo comprar {es}?"),
            (f"Do you have {en}?", f"¿Tiene {es}?"),
            (f"I would like some {en}, please.", f"Quisiera {es}, por favor."),
            (f"I like {en}.", f"Me {like} {el}."),
            (f"I do not like {en}.", f"No me {like} {el}."),
            (f"We need {en}.", f"Necesitamos {es}."),
            (f"There is no {en}." if not plural else f"There are no {en}.", f"No hay {es}."),
            (
                f"The {en} {'are' if plural else 'is'} very good.",
                cap(f"{el} {'están' if plural else 'está'} muy {good}."),
            ),
        ]
    return out


def people(rng: random.Random) -> list[tuple[str, str]]:
    """Greetings, family, work, origins and languages."""
    out = []
    for en, es, g in NAMES:
        welcome = "Bienvenido" if g == M else "Bienvenida"
        if en in ("everyone", "children"):
            welcome = "Bienvenidos"
        comma = "" if es.startswith("a ") else ","  # "Hola a todos"
        out += [
            (f"Hello, {en}.", f"Hola{comma} {es}."),
            (f"Hello, {en}!", f"¡Hola{comma} {es}!"),
            (f"Hello, {en}. How are you?", f"Hola{comma} {es}. ¿Qué tal?"),
            (f"Hi, {en}.", f"Hola{comma} {es}."),
            (f"Good morning, {en}.", f"Buenos días{comma} {es}."),
            (f"Good morning, {en}!", f"¡Buenos días{comma} {es}!"),
            (f"Good afternoon, {en}.", f"Buenas tardes{comma} {es}."),
            (f"Good evening, {en}.", f"Buenas noches{comma} {es}."),
            (f"Good night, {en}.", f"Buenas noches{comma} {es}."),
            (f"Goodbye, {en}.", f"Adiós{comma} {es}."),
            (f"Thank you, {en}.", f"Gracias{comma} {es}."),
            (f"See you soon, {en}.", f"Hasta pronto{comma} {es}."),
            (f"Welcome, {en}!", f"¡{welcome}{comma} {es}!"),
        ]
    for en, es, g in FAMILY:
        this, sick, tired = ("Este", "enfermo", "cansado") if g == M else ("Esta", "enferma", "cansada")
        job_en, masc, fem = rng.choice(JOBS)
        city_en, city_es = rng.choice(CITIES)
        age_en, age_es = rng.choice(AGES)
        out += [
            (f"This is my {en}.", f"{this} es mi {es}."),
            (f"My {en} lives in {city_en}.", f"Mi {es} vive en {city_es}."),
            (f"My {en} is {an(job_en)}.", f"Mi {es} es {masc if g == M else fem}."),
            (f"Where is your {en}?", f"¿Dónde está tu {es}?"),
            (f"My {en} is sick.", f"Mi {es} está {sick}."),
            (f"My {en} is very tired.", f"Mi {es} está muy {tired}."),
            (f"I am going to call my {en}.", f"Voy a llamar a mi {es}."),
            (f"How old is your {en}?", f"¿Cuántos años tiene tu {es}?"),
            (f"My {en} is {age_en} years old.", f"Mi {es} tiene {age_es} años."),
        ]
    for en, es in COUNTRIES:
        out += [(f"We are from {en}.", f"Somos de {es}."), (f"Have you been to {en}?", f"¿Has estado en {es}?"),
                (f"I want to travel to {en}.", f"Quiero viajar a {es}."),
                (f"She lives in {en}.", f"Ella vive en {es}.")]  # fmt: skip
    for en, es in LANGUAGES:
        out += [(f"Does he speak {en}?", f"¿Habla {es}?"), (f"I speak a little {en}.", f"Hablo un poco de {es}."),
                (f"I am learning {en}.", f"Estoy aprendiendo {es}."),
                (f"We do not speak {en}.", f"No hablamos {es}.")]  # fmt: skip
    for (en, masc, fem), (who, es, g) in itertools.product(JOBS, [("I am", "Soy", None), ("She is", "Ella es", F)]):
        out.append((f"{who} {an(en)}.", f"{es} {fem if g == F else masc}."))
    return out


def time_phrases() -> list[tuple[str, str]]:
    """Clock times, days and ages."""
    out = []
    for en, es in zip(NUMBERS, NUMEROS, strict=True):
        hour = "Es la una" if es == "una" else f"Son las {es}"
        at = "a la una" if es == "una" else f"a las {es}"
        out += [
            (f"It is {en} o'clock.", f"{hour}."),
            (f"It is half past {en}.", f"{hour} y media."),
            (f"It is a quarter past {en}.", f"{hour} y cuarto."),
            (f"The train leaves at {en} o'clock.", f"El tren sale {at}."),
            (f"The meeting is at {en}.", f"La reunión es {at}."),
            (f"See you at {en}.", f"Nos vemos {at}."),
            (f"The bank opens at {en}.", f"El banco abre {at}."),
            (f"Dinner is at {en}.", f"La cena es {at}."),
        ]
    for en, es, plural in DAYS:
        out += [
            (f"Today is {en}.", f"Hoy es {es}."),
            (f"Tomorrow is {en}.", f"Mañana es {es}."),
            (f"See you on {en}.", f"Nos vemos el {es}."),
            (f"The shop is closed on {en}s.", f"La tienda cierra los {plural}."),
            (f"I will arrive on {en}.", f"Llegaré el {es}."),
            (f"Yesterday was {en}.", f"Ayer fue {es}."),
        ]
    for en, es in AGES:
        out += [(f"I am {en} years old.", f"Tengo {es} años."), (f"She is {en} years old.", f"Ella tiene {es} años.")]
    return out


def feelings() -> list[tuple[str, str]]:
    """States with estar (and agreement), needs with tener, wishes with querer."""
    out = []
    for (s_en, be, s_es, plural), (st_en, st_es) in itertools.product(SUBJECTS, STATES):
        state = st_es + "s" if plural and st_es[-1] == "o" else st_es
        if s_en == "She" and st_es[-1] == "o":
            state = st_es[:-1] + "a"
        out.append((f"{s_en} {be} {st_en}.", f"{s_es} {state}."))
        question = {"I": None, "You": "¿Estás", "He": "¿Está", "She": "¿Está ella", "We": "¿Estamos", "They": "¿Están"}
        if question[s_en]:
            out.append((f"{be.capitalize()} {s_en.lower()} {st_en}?", f"{question[s_en]} {state}?"))
    for en, es in NEEDS:
        out += [(f"We are {en}.", f"Tenemos {es}."), (f"Are you {en}?", f"¿Tienes {es}?"),
                (f"The children are {en}.", f"Los niños tienen {es}."),
                (f"I am very {en}.", f"Tengo {'mucha' if es in ('hambre', 'sed') else 'mucho'} {es}.")]  # fmt: skip
    for en, es in ACTIVITIES:
        out += [
            (f"I want to {en}.", f"Quiero {es}."),
            (f"Do you want to {en}?", f"¿Quieres {es}?"),
            (f"Let's {en}!", f"¡Vamos a {es}!"),
            (f"I like to {en}.", f"Me gusta {es}."),
            (f"We have to {en}.", f"Tenemos que {es}."),
            (f"I do not want to {en}.", f"No quiero {es}."),
            (f"Can we {en}?", f"¿Podemos {es}?"),
        ]
    return out


VEHICLES = [("train", "tren", M), ("bus", "autobús", M), ("plane", "avión", M), ("boat", "barco", M),
            ("coach", "autocar", M), ("ferry", "ferri", M)]  # fmt: skip
WEATHER = [("hot", "Hace calor"), ("cold", "Hace frío"), ("sunny", "Hace sol"), ("windy", "Hace viento"),
           ("cloudy", "Está nublado"), ("very hot", "Hace mucho calor"), ("very cold", "Hace mucho frío")]  # fmt: skip
ACTIONS = [("Open", "Abre", "abrir"), ("Close", "Cierra", "cerrar"), ("Bring", "Trae", "traer"),
           ("Clean", "Limpia", "limpiar")]  # fmt: skip


def errands() -> list[tuple[str, str]]:
    """Transport, weather, opening times and requests: the questions of time and place people ask first."""
    out = []
    for (en, es, g), (city_en, city_es) in itertools.product(VEHICLES, CITIES):
        out += [
            (f"When does the {en} to {city_en} leave?", f"¿Cuándo sale {the(es, g)} a {city_es}?"),
            (f"What time does the {en} to {city_en} arrive?", f"¿A qué hora llega {the(es, g)} a {city_es}?"),
            (f"Is this the {en} to {city_en}?", f"¿Es este {the(es, g)} a {city_es}?"),
        ]
    for (en, es), (city_en, city_es) in itertools.product(WEATHER, CITIES):
        out.append((f"It is {en} in {city_en}.", f"{es} en {city_es}."))
    for en, es in WEATHER:
        past = es.replace("Hace", "hizo").replace("Está", "estuvo")
        out += [(f"It is {en} today.", f"Hoy {es[0].lower()}{es[1:]}."), (f"Is it {en}?", f"¿{es}?"),
                (f"It was {en} yesterday.", f"Ayer {past}.")]  # fmt: skip
    for en, es, g in PLACES:
        el = the(es, g)
        out += [
            (f"What time does the {en} open?", f"¿A qué hora abre {el}?"),
            (f"What time does the {en} close?", f"¿A qué hora cierra {el}?"),
            (f"Is the {en} open today?", f"¿Está {'abierto' if g == M else 'abierta'} {el} hoy?"),
            (f"The {en} opens at ten.", cap(f"{el} abre a las diez.")),
        ]
    for (en, informal, infinitive), (thing, es, g) in itertools.product(ACTIONS, THINGS[:24]):
        if en in ("Open", "Close") and thing not in ("door", "window", "box", "bottle", "bag", "suitcase", "book"):
            continue
        out += [(f"{en} the {thing}, please.", f"{informal} {the(es, g)}, por favor."),
                (f"Could you {en.lower()} the {thing}?", f"¿Podría {infinitive} {the(es, g)}?")]  # fmt: skip
    return out


def held_out() -> tuple[set[str], list[str]]:
    """Keys of both sides of the everyday test phrases of both sets (the README examples among them), and those of
    three or more words."""
    phrases = [side for path in (EVERYDAY, EVERYDAY2) for pair in read_tsv(path) for side in pair]
    return {key(p) for p in phrases}, [key(p) for p in phrases if len(p.split()) >= 3]


def build() -> list[tuple[str, str]]:
    """Every pair once, in order, without held-out phrases; prints how many each part gave."""
    rng = random.Random(SEED)
    parts = {"hand": read_tsv(HAND), "more": read_tsv(MORE), "spanish": read_tsv(SPANISH), "home": read_tsv(HOME),
             "town": read_tsv(TOWN), "spanish3": read_tsv(SPANISH3),
             **{name: read_tsv(path) for name, path in LATER.items()}, "places": places(),
             "things": things(rng), "food": food(), "people": people(rng), "time": time_phrases(),
             "feelings": feelings(), "errands": errands()}  # fmt: skip
    exact, long = held_out()
    pairs, seen = [], set()
    for name, found in parts.items():
        kept = 0
        for en, es in found:
            k, k_es = key(en), key(es)
            if k in exact or k_es in exact or (k, k_es) in seen or any(h in k or h in k_es for h in long):
                continue
            seen.add((k, k_es))  # the same English twice: the first Spanish for en->es (stage 9), both for es->en
            pairs.append((en, es))
            kept += 1
        print(f"{name:9s} {len(found):5d} written, {kept:5d} kept")
    return pairs


def main() -> None:
    """Write work/phrasebook.{en,es}."""
    pairs = build()
    write_lines(WORK / "phrasebook.en", [en for en, _ in pairs])
    write_lines(WORK / "phrasebook.es", [es for _, es in pairs])
    print(f"{len(pairs)} phrasebook pairs")


if __name__ == "__main__":
    main()
