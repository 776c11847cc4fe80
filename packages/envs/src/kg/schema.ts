/**
 * The ontology of the generated knowledge graph: entity types, typed relations (each with
 * its reverse, Freebase style) and numeric / date attributes, plus the English phrases the
 * question generator uses for them.
 */

/** An entity type, named as in Freebase (`film.film`, `people.person`, ...). */
export type EntityType =
  | "people.person"
  | "film.film"
  | "location.citytown"
  | "location.country"
  | "organization.organization"
  | "education.university"
  | "sports.sports_team"
  | "people.profession"
  | "film.film_genre"
  | "language.human_language"
  | "sports.sport";

/** Plural nouns of the types, as questions use them ("what are the films ..."). */
export const TYPE_NOUNS: Record<EntityType, string> = {
  "people.person": "people",
  "film.film": "films",
  "location.citytown": "cities",
  "location.country": "countries",
  "organization.organization": "organizations",
  "education.university": "universities",
  "sports.sports_team": "sports teams",
  "people.profession": "professions",
  "film.film_genre": "film genres",
  "language.human_language": "languages",
  "sports.sport": "sports",
};

/** A directed relation between two entity types. */
export interface RelationSpec {
  name: string;
  domain: EntityType;
  range: EntityType;
  /** The relation that goes the other way (every relation here has one). */
  reverse: string;
  /** Filter phrase of the range noun; `{X}` is the subject: "films" + "directed by {X}". */
  phrase: string;
}

/**
 * Relation pairs: [forward name, domain, range, forward phrase, reverse name, reverse phrase].
 * The forward phrase describes range entities; the reverse phrase describes domain entities.
 */
const RELATION_PAIRS: Array<[string, EntityType, EntityType, string, string, string]> = [
  [
    "people.person.place_of_birth",
    "people.person",
    "location.citytown",
    "that are the birthplace of {X}",
    "location.location.people_born_here",
    "born in {X}",
  ],
  [
    "people.person.nationality",
    "people.person",
    "location.country",
    "that are the nationality of {X}",
    "location.country.people_with_nationality",
    "who are citizens of {X}",
  ],
  [
    "people.person.profession",
    "people.person",
    "people.profession",
    "practised by {X}",
    "people.profession.people_with_this_profession",
    "whose profession is {X}",
  ],
  [
    "people.person.education",
    "people.person",
    "education.university",
    "attended by {X}",
    "education.educational_institution.students_graduates",
    "who studied at {X}",
  ],
  [
    "film.film.directed_by",
    "film.film",
    "people.person",
    "who directed {X}",
    "film.director.film",
    "directed by {X}",
  ],
  [
    "film.film.starring",
    "film.film",
    "people.person",
    "who starred in {X}",
    "film.actor.film",
    "starring {X}",
  ],
  [
    "film.film.genre",
    "film.film",
    "film.film_genre",
    "of {X}",
    "film.film_genre.films_in_this_genre",
    "in the genre {X}",
  ],
  [
    "film.film.country",
    "film.film",
    "location.country",
    "of origin of {X}",
    "location.country.films_produced",
    "produced in {X}",
  ],
  [
    "film.film.language",
    "film.film",
    "language.human_language",
    "spoken in {X}",
    "language.human_language.films",
    "in the language {X}",
  ],
  [
    "film.film.production_companies",
    "film.film",
    "organization.organization",
    "that produced {X}",
    "film.production_company.films",
    "produced by {X}",
  ],
  [
    "location.location.containedby",
    "location.citytown",
    "location.country",
    "containing {X}",
    "location.location.contains",
    "in {X}",
  ],
  [
    "location.country.capital",
    "location.country",
    "location.citytown",
    "that are the capital of {X}",
    "location.citytown.capital_of",
    "whose capital is {X}",
  ],
  [
    "location.country.official_language",
    "location.country",
    "language.human_language",
    "official in {X}",
    "language.human_language.countries_spoken_in",
    "speaking {X}",
  ],
  [
    "organization.organization.founders",
    "organization.organization",
    "people.person",
    "who founded {X}",
    "organization.organization_founder.organizations_founded",
    "founded by {X}",
  ],
  [
    "organization.organization.place_founded",
    "organization.organization",
    "location.citytown",
    "where {X} was founded",
    "location.citytown.organizations_founded_here",
    "founded in {X}",
  ],
  [
    "education.university.city",
    "education.university",
    "location.citytown",
    "that host {X}",
    "location.citytown.universities",
    "located in {X}",
  ],
  [
    "sports.sports_team.location",
    "sports.sports_team",
    "location.citytown",
    "that are home to {X}",
    "sports.sports_team_location.teams",
    "based in {X}",
  ],
  [
    "sports.sports_team.sport",
    "sports.sports_team",
    "sports.sport",
    "played by {X}",
    "sports.sport.teams",
    "that play {X}",
  ],
  [
    "sports.sports_team.roster",
    "sports.sports_team",
    "people.person",
    "who played for {X}",
    "sports.pro_athlete.teams",
    "that {X} played for",
  ],
];

/** Every relation by name (forward and reverse). */
export const RELATIONS: ReadonlyMap<string, RelationSpec> = new Map(
  RELATION_PAIRS.flatMap(
    ([forward, domain, range, forwardPhrase, reverse, reversePhrase]): Array<
      [string, RelationSpec]
    > => [
      [forward, { name: forward, domain, range, reverse, phrase: forwardPhrase }],
      [
        reverse,
        { name: reverse, domain: range, range: domain, reverse: forward, phrase: reversePhrase },
      ],
    ],
  ),
);

/** A numeric or date attribute (dates are stored as YYYYMMDD numbers). */
export interface AttributeSpec {
  name: string;
  domain: EntityType;
  kind: "number" | "date";
  /** Share of the domain's entities that have a value. */
  coverage: number;
  /** Words for questions: "which of the films ... has the latest {label}?" */
  label: string;
}

export const ATTRIBUTES: readonly AttributeSpec[] = [
  {
    name: "people.person.date_of_birth",
    domain: "people.person",
    kind: "date",
    coverage: 0.95,
    label: "date of birth",
  },
  {
    name: "people.person.height_meters",
    domain: "people.person",
    kind: "number",
    coverage: 0.6,
    label: "height",
  },
  {
    name: "film.film.initial_release_date",
    domain: "film.film",
    kind: "date",
    coverage: 0.95,
    label: "release date",
  },
  {
    name: "film.film.runtime",
    domain: "film.film",
    kind: "number",
    coverage: 0.85,
    label: "runtime",
  },
  {
    name: "film.film.estimated_budget",
    domain: "film.film",
    kind: "number",
    coverage: 0.5,
    label: "budget",
  },
  {
    name: "location.location.area",
    domain: "location.citytown",
    kind: "number",
    coverage: 0.9,
    label: "area",
  },
  {
    name: "location.statistical_region.population",
    domain: "location.citytown",
    kind: "number",
    coverage: 0.9,
    label: "population",
  },
  {
    name: "location.location.area",
    domain: "location.country",
    kind: "number",
    coverage: 1,
    label: "area",
  },
  {
    name: "location.statistical_region.population",
    domain: "location.country",
    kind: "number",
    coverage: 1,
    label: "population",
  },
  {
    name: "organization.organization.date_founded",
    domain: "organization.organization",
    kind: "date",
    coverage: 0.9,
    label: "founding date",
  },
  {
    name: "business.employer.number_of_employees",
    domain: "organization.organization",
    kind: "number",
    coverage: 0.7,
    label: "number of employees",
  },
  {
    name: "education.educational_institution.founded",
    domain: "education.university",
    kind: "date",
    coverage: 0.9,
    label: "founding date",
  },
  {
    name: "education.university.number_of_undergraduates",
    domain: "education.university",
    kind: "number",
    coverage: 0.7,
    label: "number of undergraduates",
  },
  {
    name: "sports.sports_team.founded",
    domain: "sports.sports_team",
    kind: "date",
    coverage: 0.9,
    label: "founding date",
  },
];

/** Attribute facts by name (an attribute shared by two types has one label and kind). */
export const ATTRIBUTE_INFO: ReadonlyMap<string, { kind: "number" | "date"; label: string }> =
  new Map(
    ATTRIBUTES.map((attribute) => [
      attribute.name,
      { kind: attribute.kind, label: attribute.label },
    ]),
  );

/** The number type a `count` produces (as in the original). */
export const NUMBER_TYPE = "type.int";
