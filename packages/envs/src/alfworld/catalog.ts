/**
 * The household catalogue the generator draws from: the ALFRED domain's receptacle and
 * object types (names as ALFWorld prints them), which receptacles open, what each object
 * can undergo (clean / heat / cool / slice / toggle), and where each may lie (`canContain`
 * of the PDDL domain: an object can only be put into a receptacle type listed here).
 */

export type RoomKind = "kitchen" | "bathroom" | "bedroom" | "livingroom";

export interface ReceptacleKind {
  type: string;
  /** Needs `open` before its contents can be seen, taken or added to. */
  openable: boolean;
}

/** A receptacle type with how many of it a room of that kind has: [min, max]. */
export interface RoomReceptacle {
  type: string;
  count: [number, number];
}

export interface ObjectKind {
  type: string;
  cleanable?: boolean;
  heatable?: boolean;
  coolable?: boolean;
  sliceable?: boolean;
  /** A lamp: `use` turns it on and off; it cannot be picked up. */
  toggleable?: boolean;
  /** Slices `sliceable` objects when held (knife, butterknife). */
  slices?: boolean;
  /** Receptacle types it may lie in (spawn) and be put into. */
  places: string[];
}

export const OPENABLE_RECEPTACLES = new Set(["cabinet", "drawer", "fridge", "microwave", "safe"]);

export function isOpenable(type: string): boolean {
  return OPENABLE_RECEPTACLES.has(type);
}

/** Receptacles of each room kind (sorted by type in the room's description). */
export const ROOM_RECEPTACLES: Record<RoomKind, RoomReceptacle[]> = {
  kitchen: [
    { type: "cabinet", count: [2, 8] },
    { type: "coffeemachine", count: [1, 1] },
    { type: "countertop", count: [1, 2] },
    { type: "diningtable", count: [0, 1] },
    { type: "drawer", count: [1, 4] },
    { type: "fridge", count: [1, 1] },
    { type: "garbagecan", count: [1, 1] },
    { type: "microwave", count: [1, 1] },
    { type: "shelf", count: [0, 2] },
    { type: "sinkbasin", count: [1, 1] },
    { type: "stoveburner", count: [2, 4] },
    { type: "toaster", count: [0, 1] },
  ],
  bathroom: [
    { type: "bathtubbasin", count: [0, 1] },
    { type: "cabinet", count: [1, 4] },
    { type: "countertop", count: [1, 1] },
    { type: "drawer", count: [0, 2] },
    { type: "garbagecan", count: [1, 1] },
    { type: "handtowelholder", count: [0, 1] },
    { type: "shelf", count: [0, 2] },
    { type: "sinkbasin", count: [1, 2] },
    { type: "toilet", count: [1, 1] },
    { type: "toiletpaperhanger", count: [1, 1] },
    { type: "towelholder", count: [0, 1] },
  ],
  bedroom: [
    { type: "bed", count: [1, 1] },
    { type: "desk", count: [0, 1] },
    { type: "drawer", count: [1, 4] },
    { type: "dresser", count: [0, 1] },
    { type: "garbagecan", count: [1, 1] },
    { type: "laundryhamper", count: [0, 1] },
    { type: "safe", count: [0, 1] },
    { type: "shelf", count: [0, 3] },
    { type: "sidetable", count: [1, 2] },
  ],
  livingroom: [
    { type: "armchair", count: [0, 1] },
    { type: "cabinet", count: [0, 2] },
    { type: "coffeetable", count: [1, 1] },
    { type: "drawer", count: [0, 3] },
    { type: "dresser", count: [0, 1] },
    { type: "garbagecan", count: [1, 1] },
    { type: "ottoman", count: [0, 1] },
    { type: "shelf", count: [0, 2] },
    { type: "sidetable", count: [1, 2] },
    { type: "sofa", count: [1, 1] },
    { type: "tvstand", count: [0, 1] },
  ],
};

const FOOD = ["countertop", "diningtable", "fridge", "microwave", "sinkbasin", "garbagecan"];
const DISHES = [
  "countertop",
  "diningtable",
  "cabinet",
  "fridge",
  "microwave",
  "sinkbasin",
  "shelf",
];
const COOKWARE = ["countertop", "diningtable", "stoveburner", "cabinet", "fridge", "sinkbasin"];
const CUTLERY = ["countertop", "diningtable", "drawer", "sinkbasin"];
const SMALL_THINGS = [
  "desk",
  "sidetable",
  "dresser",
  "drawer",
  "shelf",
  "safe",
  "coffeetable",
  "tvstand",
  "cabinet",
];
const SEATS = ["bed", "sofa", "armchair", "ottoman"];

/** Objects of each room kind. */
export const ROOM_OBJECTS: Record<RoomKind, ObjectKind[]> = {
  kitchen: [
    {
      type: "apple",
      cleanable: true,
      heatable: true,
      coolable: true,
      sliceable: true,
      places: FOOD,
    },
    {
      type: "tomato",
      cleanable: true,
      heatable: true,
      coolable: true,
      sliceable: true,
      places: FOOD,
    },
    {
      type: "potato",
      cleanable: true,
      heatable: true,
      coolable: true,
      sliceable: true,
      places: FOOD,
    },
    {
      type: "lettuce",
      cleanable: true,
      coolable: true,
      sliceable: true,
      places: FOOD.filter((p) => p !== "microwave"),
    },
    {
      type: "bread",
      heatable: true,
      coolable: true,
      sliceable: true,
      places: ["countertop", "diningtable", "fridge", "microwave", "cabinet"],
    },
    { type: "egg", cleanable: true, heatable: true, coolable: true, places: FOOD },
    {
      type: "mug",
      cleanable: true,
      heatable: true,
      coolable: true,
      places: [...DISHES, "coffeemachine"],
    },
    { type: "cup", cleanable: true, heatable: true, coolable: true, places: DISHES },
    { type: "plate", cleanable: true, heatable: true, coolable: true, places: DISHES },
    { type: "bowl", cleanable: true, heatable: true, coolable: true, places: DISHES },
    { type: "pan", cleanable: true, coolable: true, places: COOKWARE },
    { type: "pot", cleanable: true, coolable: true, places: COOKWARE },
    {
      type: "kettle",
      cleanable: true,
      places: ["countertop", "stoveburner", "cabinet", "sinkbasin"],
    },
    { type: "knife", cleanable: true, slices: true, places: CUTLERY },
    { type: "butterknife", cleanable: true, slices: true, places: CUTLERY },
    { type: "fork", cleanable: true, places: CUTLERY },
    { type: "spoon", cleanable: true, places: CUTLERY },
    { type: "spatula", cleanable: true, places: CUTLERY },
    { type: "ladle", cleanable: true, places: CUTLERY },
    {
      type: "dishsponge",
      cleanable: true,
      places: ["countertop", "cabinet", "drawer", "sinkbasin", "garbagecan"],
    },
    { type: "saltshaker", places: ["countertop", "diningtable", "cabinet", "drawer", "shelf"] },
    { type: "peppershaker", places: ["countertop", "diningtable", "cabinet", "drawer", "shelf"] },
    { type: "soapbottle", places: ["countertop", "cabinet", "shelf", "garbagecan"] },
  ],
  bathroom: [
    {
      type: "soapbar",
      cleanable: true,
      places: [
        "countertop",
        "cabinet",
        "sinkbasin",
        "toilet",
        "bathtubbasin",
        "garbagecan",
        "shelf",
      ],
    },
    {
      type: "cloth",
      cleanable: true,
      places: ["countertop", "cabinet", "sinkbasin", "toilet", "bathtubbasin", "shelf", "drawer"],
    },
    {
      type: "spraybottle",
      places: ["countertop", "cabinet", "toilet", "shelf", "garbagecan", "drawer"],
    },
    { type: "soapbottle", places: ["countertop", "cabinet", "toilet", "shelf", "garbagecan"] },
    {
      type: "toiletpaper",
      places: [
        "countertop",
        "cabinet",
        "toilet",
        "toiletpaperhanger",
        "shelf",
        "garbagecan",
        "drawer",
      ],
    },
    {
      type: "candle",
      places: ["countertop", "cabinet", "toilet", "shelf", "bathtubbasin", "drawer"],
    },
    { type: "handtowel", places: ["handtowelholder", "countertop", "cabinet"] },
    { type: "towel", places: ["towelholder", "countertop", "cabinet", "bathtubbasin"] },
    { type: "tissuebox", places: ["countertop", "toilet", "shelf", "cabinet"] },
  ],
  bedroom: [
    { type: "alarmclock", places: ["desk", "sidetable", "dresser", "shelf"] },
    { type: "book", places: ["bed", "desk", "sidetable", "dresser", "shelf", "drawer"] },
    { type: "cd", places: ["desk", "sidetable", "drawer", "shelf", "safe", "garbagecan"] },
    { type: "cellphone", places: ["bed", ...SMALL_THINGS] },
    { type: "creditcard", places: SMALL_THINGS },
    { type: "keychain", places: SMALL_THINGS },
    { type: "pen", places: ["desk", "sidetable", "drawer", "shelf", "garbagecan"] },
    { type: "pencil", places: ["desk", "sidetable", "drawer", "shelf", "garbagecan"] },
    { type: "laptop", places: ["bed", "desk", "sidetable", "dresser"] },
    { type: "pillow", places: SEATS },
    { type: "watch", places: SMALL_THINGS },
    { type: "mug", places: ["desk", "sidetable", "shelf"] },
    { type: "bowl", places: ["desk", "sidetable", "dresser", "shelf"] },
    { type: "cloth", places: ["laundryhamper", "dresser", "drawer", "bed"] },
    { type: "desklamp", toggleable: true, places: ["desk", "sidetable", "dresser"] },
  ],
  livingroom: [
    {
      type: "remotecontrol",
      places: ["sofa", "armchair", "coffeetable", "sidetable", "tvstand", "dresser", "drawer"],
    },
    { type: "keychain", places: ["sofa", ...SMALL_THINGS] },
    { type: "creditcard", places: ["sofa", "armchair", ...SMALL_THINGS] },
    { type: "cellphone", places: ["sofa", "armchair", ...SMALL_THINGS] },
    {
      type: "newspaper",
      places: ["sofa", "armchair", "coffeetable", "sidetable", "tvstand", "dresser", "ottoman"],
    },
    { type: "pillow", places: SEATS },
    {
      type: "statue",
      places: ["coffeetable", "sidetable", "tvstand", "dresser", "shelf", "cabinet"],
    },
    {
      type: "vase",
      places: ["coffeetable", "sidetable", "tvstand", "dresser", "shelf", "cabinet"],
    },
    { type: "box", places: ["sofa", "coffeetable", "sidetable", "tvstand", "dresser", "ottoman"] },
    { type: "laptop", places: ["sofa", "coffeetable", "sidetable", "ottoman", "armchair"] },
    { type: "watch", places: ["coffeetable", "sidetable", "dresser", "drawer", "shelf"] },
    { type: "tissuebox", places: ["coffeetable", "sidetable", "tvstand", "dresser", "shelf"] },
    { type: "desklamp", toggleable: true, places: ["sidetable", "dresser", "desk"] },
  ],
};

export function objectKind(room: RoomKind, type: string): ObjectKind {
  const kind = ROOM_OBJECTS[room].find((k) => k.type === type);
  if (!kind) throw new Error(`no object type "${type}" in a ${room}`);
  return kind;
}
