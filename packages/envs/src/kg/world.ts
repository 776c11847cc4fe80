/**
 * The generated world: a knowledge graph of a few thousand entities (people, films, cities,
 * countries, organizations, universities, sports teams and small vocabularies), held in an
 * in-memory triple store with the queries the KG tools need.
 *
 * Entities are numbered 0..N-1; their public ids look like Freebase mids (`m.0a1b2`).
 * Generation is deterministic in the seed and takes a few tens of milliseconds.
 */
import { Random } from "../random.js";
import { ATTRIBUTES, RELATIONS, type EntityType } from "./schema.js";

export interface Entity {
  /** Freebase-style id, e.g. `m.00k3f`. */
  id: string;
  /** Unique display name, e.g. "Mara Ellison". */
  name: string;
  type: EntityType;
}

/** How many entities of each generated type the world holds. */
export interface WorldSizes {
  countries: number;
  cities: number;
  people: number;
  films: number;
  organizations: number;
  universities: number;
  teams: number;
}

export const DEFAULT_WORLD_SIZES: WorldSizes = {
  countries: 30,
  cities: 300,
  people: 3000,
  films: 1500,
  organizations: 150,
  universities: 120,
  teams: 150,
};

/** The in-memory triple store. */
export class KnowledgeGraph {
  readonly entities: Entity[] = [];
  /** relation name → subject → objects (sorted ascending, no duplicates). */
  private readonly edges = new Map<string, Map<number, number[]>>();
  /** attribute name → entity → value. */
  private readonly values = new Map<string, Map<number, number>>();
  private readonly idToEntity = new Map<string, number>();
  private readonly byType = new Map<EntityType, number[]>();

  /** Adds an entity and returns its number. */
  addEntity(name: string, type: EntityType): number {
    const index = this.entities.length;
    const id = `m.0${index.toString(36).padStart(4, "0")}`;
    this.entities.push({ id, name, type });
    this.idToEntity.set(id, index);
    const list = this.byType.get(type) ?? [];
    list.push(index);
    this.byType.set(type, list);
    return index;
  }

  /** Adds the fact (subject, relation, object) and its reverse. */
  addFact(subject: number, relation: string, object: number): void {
    const spec = RELATIONS.get(relation);
    if (!spec) throw new Error(`unknown relation ${relation}`);
    this.addEdge(relation, subject, object);
    this.addEdge(spec.reverse, object, subject);
  }

  setValue(entity: number, attribute: string, value: number): void {
    const map = this.values.get(attribute) ?? new Map<number, number>();
    map.set(entity, value);
    this.values.set(attribute, map);
  }

  private addEdge(relation: string, subject: number, object: number): void {
    let bySubject = this.edges.get(relation);
    if (!bySubject) this.edges.set(relation, (bySubject = new Map()));
    const objects = bySubject.get(subject);
    if (!objects) bySubject.set(subject, [object]);
    else if (!objects.includes(object)) {
      objects.push(object);
      objects.sort((a, b) => a - b);
    }
  }

  /** Entity number of a Freebase-style id, or undefined. */
  entityById(id: string): number | undefined {
    return this.idToEntity.get(id);
  }

  /** The types that have at least one entity, in order of first appearance. */
  entityTypes(): EntityType[] {
    return [...this.byType.keys()];
  }

  entitiesOfType(type: EntityType): readonly number[] {
    return this.byType.get(type) ?? [];
  }

  /** Objects of `relation` from one subject (sorted). */
  objects(subject: number, relation: string): readonly number[] {
    return this.edges.get(relation)?.get(subject) ?? [];
  }

  /** All objects reachable from any of `subjects` by `relation` (sorted, distinct). */
  neighbors(subjects: Iterable<number>, relation: string): number[] {
    const bySubject = this.edges.get(relation);
    if (!bySubject) return [];
    const result = new Set<number>();
    for (const subject of subjects)
      for (const object of bySubject.get(subject) ?? []) result.add(object);
    return [...result].sort((a, b) => a - b);
  }

  /** Relations leaving any of `subjects` (sorted by name). */
  relationsOf(subjects: Iterable<number>): string[] {
    const list = [...subjects];
    const result: string[] = [];
    for (const [relation, bySubject] of this.edges) {
      if (list.some((subject) => bySubject.has(subject))) result.push(relation);
    }
    return result.sort();
  }

  /** Attributes that any of `subjects` has a value for (sorted by name). */
  attributesOf(subjects: Iterable<number>): string[] {
    const list = [...subjects];
    const result: string[] = [];
    for (const [attribute, byEntity] of this.values) {
      if (list.some((subject) => byEntity.has(subject))) result.push(attribute);
    }
    return result.sort();
  }

  value(entity: number, attribute: string): number | undefined {
    return this.values.get(attribute)?.get(entity);
  }

  /**
   * The members of `subjects` whose `attribute` is largest (`max`) or smallest (`min`);
   * all of them on a tie; members without a value are ignored.
   */
  extreme(subjects: Iterable<number>, attribute: string, direction: "max" | "min"): number[] {
    let best: number | undefined;
    let winners: number[] = [];
    for (const subject of subjects) {
      const value = this.value(subject, attribute);
      if (value === undefined) continue;
      const better = best === undefined || (direction === "max" ? value > best : value < best);
      if (better) {
        best = value;
        winners = [subject];
      } else if (value === best) winners.push(subject);
    }
    return winners.sort((a, b) => a - b);
  }

  get factCount(): number {
    let count = 0;
    for (const bySubject of this.edges.values())
      for (const objects of bySubject.values()) count += objects.length;
    return count;
  }
}

// ---------------------------------------------------------------------------------------
// Names

const FIRST_NAMES = [
  "Ada",
  "Alan",
  "Alma",
  "Amir",
  "Anna",
  "Arlo",
  "Bea",
  "Boris",
  "Carla",
  "Cyrus",
  "Dana",
  "Dario",
  "Edith",
  "Elias",
  "Elsa",
  "Emil",
  "Ezra",
  "Farah",
  "Felix",
  "Greta",
  "Hana",
  "Hugo",
  "Ida",
  "Igor",
  "Ines",
  "Ivan",
  "Jada",
  "Jonas",
  "Kai",
  "Kira",
  "Lars",
  "Lena",
  "Leon",
  "Lila",
  "Luca",
  "Mara",
  "Marek",
  "Maya",
  "Milo",
  "Mina",
  "Nadia",
  "Nico",
  "Nina",
  "Noor",
  "Olga",
  "Omar",
  "Oscar",
  "Paula",
  "Pavel",
  "Petra",
  "Quinn",
  "Rafa",
  "Rhea",
  "Rosa",
  "Ruben",
  "Sami",
  "Sara",
  "Silas",
  "Sofia",
  "Tariq",
  "Tess",
  "Theo",
  "Uma",
  "Vera",
  "Victor",
  "Wanda",
  "Willa",
  "Xavi",
  "Yara",
  "Yusuf",
  "Zara",
  "Zeno",
  "Aurel",
  "Brisa",
  "Cosmo",
  "Delia",
  "Enzo",
  "Flora",
  "Gideon",
  "Helka",
];
const LAST_NAMES = [
  "Abara",
  "Bellamy",
  "Brandt",
  "Calder",
  "Castell",
  "Dovre",
  "Ellison",
  "Falk",
  "Ferro",
  "Galloway",
  "Grahn",
  "Halvorsen",
  "Hartley",
  "Ibsen",
  "Imura",
  "Jansen",
  "Kato",
  "Keller",
  "Kovac",
  "Lachance",
  "Lindqvist",
  "Lund",
  "Madsen",
  "Marlowe",
  "Mendez",
  "Moreau",
  "Nakamura",
  "Novak",
  "Oduya",
  "Okafor",
  "Orsini",
  "Pajari",
  "Quintero",
  "Radu",
  "Reyes",
  "Rinaldi",
  "Sato",
  "Serrano",
  "Sokol",
  "Strand",
  "Tanaka",
  "Toivonen",
  "Ulloa",
  "Vance",
  "Varga",
  "Vesely",
  "Wagner",
  "Weller",
  "Yilmaz",
  "Zelenko",
  "Acosta",
  "Bergman",
  "Cortez",
  "Dahl",
  "Eklund",
  "Fontaine",
  "Greco",
  "Holm",
  "Ivers",
  "Jovanovic",
  "Kaur",
  "Laine",
  "Mori",
  "Nilsen",
  "Olsen",
  "Petrov",
  "Rossi",
  "Santos",
  "Tamura",
  "Ueda",
  "Valdez",
  "Wolff",
  "Young",
  "Zamora",
  "Aalto",
  "Bianchi",
  "Czerny",
  "Drake",
  "Eze",
  "Fischer",
];
const SYLLABLES = [
  "ka",
  "ri",
  "ven",
  "tor",
  "mal",
  "do",
  "sel",
  "an",
  "bru",
  "gor",
  "li",
  "na",
  "os",
  "pe",
  "tha",
  "mer",
  "quin",
  "ro",
  "sa",
  "vel",
  "zan",
  "dar",
  "fen",
  "mor",
  "lu",
  "ber",
  "cas",
  "del",
  "ek",
  "fal",
  "har",
  "iv",
  "jor",
  "kel",
  "lom",
  "nor",
  "ost",
  "pra",
  "run",
  "sto",
];
const COUNTRY_ENDINGS = ["ia", "land", "stan", "ora", "ovia", "eth"];
const CITY_ENDINGS = [
  "ton",
  "burg",
  "holt",
  "ford",
  "mouth",
  "vale",
  "by",
  "grad",
  "port",
  "haven",
  "",
];
const LANGUAGE_ENDINGS = ["ish", "ese", "ic", "ian", "i"];
const FILM_ADJECTIVES = [
  "Silent",
  "Broken",
  "Golden",
  "Hidden",
  "Last",
  "Lost",
  "Crimson",
  "Distant",
  "Endless",
  "Frozen",
  "Burning",
  "Quiet",
  "Wild",
  "Secret",
  "Hollow",
  "Bright",
  "Dark",
  "Iron",
  "Paper",
  "Glass",
  "Velvet",
  "Electric",
  "Wandering",
  "Sleeping",
  "Northern",
  "Falling",
  "Bitter",
  "Gentle",
  "Savage",
  "Midnight",
  "Scarlet",
  "Restless",
  "Forgotten",
  "Shining",
  "Pale",
  "Sacred",
  "Rusty",
  "Eternal",
  "Fading",
  "Stolen",
];
const FILM_NOUNS = [
  "River",
  "Garden",
  "Empire",
  "Harbor",
  "Mirror",
  "Shadow",
  "Summer",
  "Winter",
  "Kingdom",
  "Road",
  "Letter",
  "Island",
  "Tower",
  "Forest",
  "Storm",
  "Echo",
  "Promise",
  "Horizon",
  "Machine",
  "Orchard",
  "Lantern",
  "Bridge",
  "Desert",
  "Voyage",
  "Crown",
  "Signal",
  "Compass",
  "Frontier",
  "Heart",
  "Station",
  "Canyon",
  "Carnival",
  "Theory",
  "Mountain",
  "Circus",
  "Witness",
  "Archive",
  "Passage",
  "Season",
  "Melody",
];
const COMPANY_SUFFIXES = [
  "Pictures",
  "Studios",
  "Group",
  "Industries",
  "Systems",
  "Media",
  "Holdings",
  "Works",
  "Labs",
  "Films",
];
const TEAM_MASCOTS = [
  "Lions",
  "Falcons",
  "Wolves",
  "Rangers",
  "Comets",
  "Titans",
  "Sharks",
  "Bears",
  "Hawks",
  "Pirates",
  "Knights",
  "Rockets",
  "Stallions",
  "Vipers",
  "Owls",
  "Foxes",
  "Giants",
  "Mariners",
  "Storm",
  "Thunder",
];
const PROFESSIONS = [
  "Actor",
  "Film director",
  "Athlete",
  "Entrepreneur",
  "Writer",
  "Politician",
  "Scientist",
  "Musician",
  "Engineer",
  "Lawyer",
  "Physician",
  "Architect",
];
const GENRES = [
  "Drama",
  "Comedy",
  "Thriller",
  "Horror",
  "Documentary",
  "Science fiction",
  "Romance",
  "Western",
  "Animation",
  "Crime",
  "Adventure",
  "Musical",
];
const SPORTS = ["Football", "Basketball", "Ice hockey", "Baseball", "Rugby", "Volleyball"];

/** Hands out names that are unique across the whole world. */
class NameBook {
  private readonly used = new Set<string>();
  constructor(private readonly random: Random) {}

  /** A fresh name from `make`, retried until unused. */
  take(make: () => string): string {
    for (let attempt = 0; attempt < 1000; attempt++) {
      const name = make();
      if (!this.used.has(name)) {
        this.used.add(name);
        return name;
      }
    }
    throw new Error("NameBook: could not find an unused name (world too large for the name lists)");
  }

  word(syllables: number, ending: string): string {
    let word = "";
    for (let i = 0; i < syllables; i++) word += this.random.pick(SYLLABLES);
    word += ending;
    return word[0].toUpperCase() + word.slice(1);
  }
}

// ---------------------------------------------------------------------------------------
// Generation

/** A date as a YYYYMMDD number, uniform over the years [from, to]. */
function randomDate(random: Random, from: number, to: number): number {
  return random.integer(from, to) * 10_000 + random.integer(1, 12) * 100 + random.integer(1, 28);
}

/** Picks from `pool` with a skew toward its first entries (a few prolific members). */
function skewedPick(random: Random, pool: readonly number[]): number {
  return pool[Math.floor(pool.length * random.next() ** 2)];
}

/** Gives each entity of `type` the attributes of that type, with their coverage. */
function addAttributes(
  world: KnowledgeGraph,
  random: Random,
  type: EntityType,
  entity: number,
): void {
  for (const attribute of ATTRIBUTES) {
    if (attribute.domain !== type || !random.chance(attribute.coverage)) continue;
    world.setValue(entity, attribute.name, attributeValue(random, attribute.name));
  }
}

function attributeValue(random: Random, attribute: string): number {
  switch (attribute) {
    case "people.person.date_of_birth":
      return randomDate(random, 1920, 2005);
    case "people.person.height_meters":
      return random.integer(150, 205) / 100;
    case "film.film.initial_release_date":
      return randomDate(random, 1930, 2024);
    case "film.film.runtime":
      return random.integer(70, 210);
    case "film.film.estimated_budget":
      return random.integer(1, 3000) * 100_000;
    case "location.location.area":
      return random.integer(50, 900_000);
    case "location.statistical_region.population":
      return Math.round(10 ** (3 + random.next() * 5));
    case "organization.organization.date_founded":
      return randomDate(random, 1850, 2020);
    case "business.employer.number_of_employees":
      return Math.round(10 ** (1 + random.next() * 5));
    case "education.educational_institution.founded":
      return randomDate(random, 1200, 2010);
    case "education.university.number_of_undergraduates":
      return random.integer(500, 60_000);
    case "sports.sports_team.founded":
      return randomDate(random, 1870, 2015);
    default:
      throw new Error(`no value generator for attribute ${attribute}`);
  }
}

/** Builds the world of `seed`. Same seed and sizes, same world. */
export function generateWorld(
  seed: number,
  sizes: WorldSizes = DEFAULT_WORLD_SIZES,
): KnowledgeGraph {
  const random = new Random(seed);
  const names = new NameBook(random);
  const world = new KnowledgeGraph();

  const professions = PROFESSIONS.map((name) =>
    world.addEntity(
      names.take(() => name),
      "people.profession",
    ),
  );
  const genres = GENRES.map((name) =>
    world.addEntity(
      names.take(() => name),
      "film.film_genre",
    ),
  );
  const sports = SPORTS.map((name) =>
    world.addEntity(
      names.take(() => name),
      "sports.sport",
    ),
  );
  const languages = Array.from({ length: 15 }, () =>
    world.addEntity(
      names.take(() => names.word(random.integer(1, 2), random.pick(LANGUAGE_ENDINGS))),
      "language.human_language",
    ),
  );

  const countries = Array.from({ length: sizes.countries }, () => {
    const country = world.addEntity(
      names.take(() => names.word(random.integer(1, 2), random.pick(COUNTRY_ENDINGS))),
      "location.country",
    );
    for (const language of random.sample(languages, random.chance(0.3) ? 2 : 1))
      world.addFact(country, "location.country.official_language", language);
    addAttributes(world, random, "location.country", country);
    return country;
  });

  const cities = Array.from({ length: sizes.cities }, (_, i) => {
    const city = world.addEntity(
      names.take(() => names.word(random.integer(1, 2), random.pick(CITY_ENDINGS))),
      "location.citytown",
    );
    // Round-robin first so that every country has cities, then a skew toward big countries.
    const country =
      i < countries.length * 2 ? countries[i % countries.length] : skewedPick(random, countries);
    world.addFact(city, "location.location.containedby", country);
    addAttributes(world, random, "location.citytown", city);
    return city;
  });
  for (const country of countries) {
    const own = world.objects(country, "location.location.contains");
    const capital = [...own].sort(
      (a, b) =>
        (world.value(b, "location.statistical_region.population") ?? 0) -
        (world.value(a, "location.statistical_region.population") ?? 0),
    )[0];
    if (capital !== undefined) world.addFact(country, "location.country.capital", capital);
  }

  const universities = Array.from({ length: sizes.universities }, () => {
    const city = random.pick(cities);
    const cityName = world.entities[city].name;
    const university = world.addEntity(
      names.take(() =>
        random.pick([
          `University of ${cityName}`,
          `${cityName} Institute of Technology`,
          `${cityName} State University`,
          `${names.word(2, "")} College`,
        ]),
      ),
      "education.university",
    );
    world.addFact(university, "education.university.city", city);
    addAttributes(world, random, "education.university", university);
    return university;
  });

  const [actor, director, athlete, entrepreneur] = professions;
  const otherProfessions = professions.slice(4);
  const actors: number[] = [];
  const directors: number[] = [];
  const athletes: number[] = [];
  const entrepreneurs: number[] = [];
  for (let i = 0; i < sizes.people; i++) {
    const person = world.addEntity(
      names.take(() => `${random.pick(FIRST_NAMES)} ${random.pick(LAST_NAMES)}`),
      "people.person",
    );
    const share = i / sizes.people;
    const role =
      share < 0.1
        ? director
        : share < 0.5
          ? actor
          : share < 0.6
            ? athlete
            : share < 0.65
              ? entrepreneur
              : random.pick(otherProfessions);
    const roles = new Set([role]);
    if (random.chance(0.25)) roles.add(random.pick(professions));
    for (const profession of roles) {
      world.addFact(person, "people.person.profession", profession);
      if (profession === actor) actors.push(person);
      if (profession === director) directors.push(person);
      if (profession === athlete) athletes.push(person);
      if (profession === entrepreneur) entrepreneurs.push(person);
    }
    if (random.chance(0.92)) {
      const birthplace = random.pick(cities);
      world.addFact(person, "people.person.place_of_birth", birthplace);
      const home = world.objects(birthplace, "location.location.containedby")[0];
      world.addFact(
        person,
        "people.person.nationality",
        random.chance(0.85) ? home : random.pick(countries),
      );
    } else {
      world.addFact(person, "people.person.nationality", random.pick(countries));
    }
    if (random.chance(0.55))
      world.addFact(person, "people.person.education", random.pick(universities));
    addAttributes(world, random, "people.person", person);
  }
  // Shuffled so that the skewed picks below favour random people, not the first ones made.
  const filmActors = random.shuffle(actors);
  const filmDirectors = random.shuffle(directors);
  const teamAthletes = random.shuffle(athletes);

  const organizations = Array.from({ length: sizes.organizations }, () => {
    const organization = world.addEntity(
      names.take(() => `${names.word(random.integer(1, 2), "")} ${random.pick(COMPANY_SUFFIXES)}`),
      "organization.organization",
    );
    for (const founder of random.sample(entrepreneurs, random.chance(0.3) ? 2 : 1))
      world.addFact(organization, "organization.organization.founders", founder);
    world.addFact(organization, "organization.organization.place_founded", random.pick(cities));
    addAttributes(world, random, "organization.organization", organization);
    return organization;
  });

  for (let i = 0; i < sizes.films; i++) {
    const film = world.addEntity(
      names.take(() =>
        random.chance(0.5)
          ? `The ${random.pick(FILM_ADJECTIVES)} ${random.pick(FILM_NOUNS)}`
          : `${random.pick(FILM_NOUNS)} of the ${random.pick(FILM_ADJECTIVES)} ${random.pick(FILM_NOUNS)}`,
      ),
      "film.film",
    );
    const directorCount = random.chance(0.1) ? 2 : 1;
    for (let d = 0; d < directorCount; d++)
      world.addFact(film, "film.film.directed_by", skewedPick(random, filmDirectors));
    const castSize = random.integer(2, 6);
    for (let a = 0; a < castSize; a++)
      world.addFact(film, "film.film.starring", skewedPick(random, filmActors));
    for (const genre of random.sample(genres, random.chance(0.4) ? 2 : 1))
      world.addFact(film, "film.film.genre", genre);
    const country = skewedPick(random, countries);
    world.addFact(film, "film.film.country", country);
    const spoken = world.objects(country, "location.country.official_language");
    world.addFact(
      film,
      "film.film.language",
      random.chance(0.8) && spoken.length > 0 ? random.pick(spoken) : random.pick(languages),
    );
    const companyCount = random.chance(0.25) ? 2 : 1;
    for (let c = 0; c < companyCount; c++)
      world.addFact(film, "film.film.production_companies", skewedPick(random, organizations));
    addAttributes(world, random, "film.film", film);
  }

  for (let i = 0; i < sizes.teams; i++) {
    const city = random.pick(cities);
    const team = world.addEntity(
      names.take(() => `${world.entities[city].name} ${random.pick(TEAM_MASCOTS)}`),
      "sports.sports_team",
    );
    world.addFact(team, "sports.sports_team.location", city);
    world.addFact(team, "sports.sports_team.sport", random.pick(sports));
    const rosterSize = random.integer(8, 15);
    for (let p = 0; p < rosterSize; p++)
      world.addFact(team, "sports.sports_team.roster", random.pick(teamAthletes));
    addAttributes(world, random, "sports.sports_team", team);
  }
  return world;
}
