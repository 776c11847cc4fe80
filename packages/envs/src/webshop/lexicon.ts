/**
 * The vocabulary of the generated catalogue: five categories as in the original WebShop
 * (beauty, food, fashion, furniture, electronics), 40 product types, their attributes,
 * their buying options, brands, and the words that count as nouns for the type reward.
 */

/** One buying option group (e.g. size) and every value a product of the type may offer. */
export interface OptionGroup {
  name: string;
  values: readonly string[];
}

/** A kind of product: what a shopper searches for, and what its products can have. */
export interface ProductType {
  category: Category;
  /** The search query the product was "scraped" with (the original's `query`), lower case. */
  query: string;
  /** How the type reads in a title, e.g. "Women's Jeans". */
  title: string;
  /** The nouns of `title`, lower case (what spaCy tags NOUN/PROPN in the original). */
  nouns: readonly string[];
  /** Amazon-style breadcrumb, segments joined with " › ". */
  productCategory: string;
  /** Attributes only this type has; each type also gets its category's shared ones. */
  attributes: readonly string[];
  /** Option groups its products may offer (none: products of the type have no options). */
  options: readonly OptionGroup[];
  /** Price range in dollars. */
  price: readonly [number, number];
}

export const CATEGORIES = ["fashion", "beauty", "food", "furniture", "electronics"] as const;
export type Category = (typeof CATEGORIES)[number];

const CLOTHING_SIZE: OptionGroup = {
  name: "size",
  values: ["x-small", "small", "medium", "large", "x-large", "xx-large"],
};
const SHOE_SIZE: OptionGroup = { name: "size", values: ["6", "7", "8", "9", "10", "11", "12"] };
const COLOR: OptionGroup = {
  name: "color",
  values: [
    "black",
    "white",
    "navy blue",
    "gray",
    "red",
    "olive green",
    "beige",
    "pink",
    "brown",
    "light blue",
  ],
};
const LIP_COLOR: OptionGroup = {
  name: "color",
  values: ["classic red", "nude", "plum", "coral", "berry", "mauve"],
};
const BEAUTY_SIZE: OptionGroup = {
  name: "size",
  values: ["1 fl oz", "3.4 fl oz", "8 fl oz", "16 fl oz"],
};
const SCENT: OptionGroup = {
  name: "scent",
  values: ["lavender", "unscented", "citrus", "coconut", "vanilla", "eucalyptus"],
};
const FLAVOR: OptionGroup = {
  name: "flavor",
  values: ["original", "chocolate", "vanilla", "strawberry", "sea salt", "cinnamon"],
};
const FOOD_SIZE: OptionGroup = {
  name: "size",
  values: ["8 ounce", "12 ounce", "16 ounce", "24 ounce", "pack of 6", "pack of 12"],
};
const WOOD_COLOR: OptionGroup = {
  name: "color",
  values: ["walnut", "oak", "white", "black", "espresso", "gray"],
};
const BED_SIZE: OptionGroup = { name: "size", values: ["twin", "full", "queen", "king"] };
const CABLE_LENGTH: OptionGroup = { name: "size", values: ["3 ft", "6 ft", "10 ft", "15 ft"] };
const CAPACITY: OptionGroup = { name: "capacity", values: ["32gb", "64gb", "128gb", "256gb"] };

/** Attributes every type of a category may have, next to its own. */
export const SHARED_ATTRIBUTES: Record<Category, readonly string[]> = {
  fashion: ["machine wash", "soft material", "everyday wear", "lightweight design"],
  beauty: ["long lasting", "cruelty free", "paraben free", "natural ingredients"],
  food: ["gluten free", "non gmo", "low sugar", "usda organic"],
  furniture: ["easy assemble", "solid wood", "living room", "space saving"],
  electronics: ["fast charging", "easy use", "high quality", "plug play"],
};

const ROOTS: Record<Category, string> = {
  fashion: "Clothing, Shoes & Jewelry",
  beauty: "Beauty & Personal Care",
  food: "Grocery & Gourmet Food",
  furniture: "Home & Kitchen › Furniture",
  electronics: "Electronics",
};

type TypeRow = [
  query: string,
  title: string,
  nouns: string,
  path: string,
  attributes: string,
  options: OptionGroup[],
  low: number,
  high: number,
];

const TYPE_ROWS: Record<Category, TypeRow[]> = {
  fashion: [
    [
      "women's jeans",
      "Women's Jeans",
      "women jeans",
      "Women › Clothing › Jeans",
      "slim fit|high waist|stretch denim|button closure",
      [CLOTHING_SIZE, COLOR],
      18,
      70,
    ],
    [
      "men's t-shirt",
      "Men's T-Shirt",
      "men shirt",
      "Men › Clothing › Shirts",
      "short sleeve|crew neck|regular fit|cotton blend",
      [CLOTHING_SIZE, COLOR],
      8,
      35,
    ],
    [
      "men's running shoes",
      "Men's Running Shoes",
      "men shoes",
      "Men › Shoes › Athletic",
      "rubber sole|arch support|lace up|breathable mesh",
      [SHOE_SIZE, COLOR],
      30,
      120,
    ],
    [
      "women's dress",
      "Women's Dress",
      "women dress",
      "Women › Clothing › Dresses",
      "wrap style|v neck|knee length|floral print",
      [CLOTHING_SIZE, COLOR],
      20,
      80,
    ],
    [
      "men's hoodie",
      "Men's Hoodie",
      "men hoodie",
      "Men › Clothing › Fashion Hoodies",
      "drawstring hood|fleece lined|zip up|kangaroo pocket",
      [CLOTHING_SIZE, COLOR],
      20,
      65,
    ],
    [
      "women's leggings",
      "Women's Leggings",
      "women leggings",
      "Women › Clothing › Leggings",
      "tummy control|squat proof|yoga workout|side pockets",
      [CLOTHING_SIZE, COLOR],
      12,
      45,
    ],
    [
      "baseball cap",
      "Baseball Cap",
      "baseball cap",
      "Accessories › Hats & Caps",
      "adjustable strap|sun protection|cotton twill|curved brim",
      [COLOR],
      9,
      30,
    ],
    [
      "women's sandals",
      "Women's Sandals",
      "women sandals",
      "Women › Shoes › Sandals",
      "open toe|ankle strap|flat heel|memory foam",
      [SHOE_SIZE, COLOR],
      15,
      60,
    ],
  ],
  beauty: [
    [
      "shampoo",
      "Shampoo",
      "shampoo",
      "Hair Care › Shampoo & Conditioner",
      "sulfate free|dry hair|color treated|tea tree",
      [BEAUTY_SIZE, SCENT],
      6,
      35,
    ],
    [
      "face moisturizer",
      "Face Moisturizer",
      "face moisturizer",
      "Skin Care › Face › Moisturizers",
      "hyaluronic acid|sensitive skin|spf 30|oil free",
      [BEAUTY_SIZE],
      10,
      60,
    ],
    [
      "lipstick",
      "Lipstick",
      "lipstick",
      "Makeup › Lips › Lipstick",
      "matte finish|highly pigmented|vitamin e|smudge proof",
      [LIP_COLOR],
      5,
      30,
    ],
    [
      "body lotion",
      "Body Lotion",
      "body lotion",
      "Skin Care › Body › Lotions",
      "shea butter|dry skin|fast absorbing|non greasy",
      [BEAUTY_SIZE, SCENT],
      6,
      30,
    ],
    [
      "hair dryer",
      "Hair Dryer",
      "hair dryer",
      "Hair Care › Styling Tools › Dryers",
      "ionic technology|low noise|diffuser attachment|cool shot",
      [COLOR],
      20,
      120,
    ],
    [
      "nail polish",
      "Nail Polish",
      "nail polish",
      "Makeup › Nails › Nail Polish",
      "quick dry|chip resistant|high shine|gel effect",
      [LIP_COLOR],
      4,
      20,
    ],
    [
      "women's perfume",
      "Women's Perfume",
      "women perfume",
      "Fragrance › Women › Eau de Parfum",
      "eau de parfum|travel size|fresh fragrance|gift set",
      [BEAUTY_SIZE],
      15,
      110,
    ],
    [
      "makeup brush set",
      "Makeup Brush Set",
      "makeup brush set",
      "Tools & Accessories › Makeup Brushes",
      "synthetic bristles|travel case|foundation brush|eye shadow",
      [],
      8,
      45,
    ],
  ],
  food: [
    [
      "protein bar",
      "Protein Bar",
      "protein bar",
      "Snack Foods › Bars › Protein Bars",
      "high protein|low carb|keto friendly|whey isolate",
      [FLAVOR, FOOD_SIZE],
      10,
      45,
    ],
    [
      "ground coffee",
      "Ground Coffee",
      "coffee",
      "Beverages › Coffee › Ground Coffee",
      "medium roast|dark roast|fair trade|single origin",
      [FOOD_SIZE],
      7,
      40,
    ],
    [
      "green tea",
      "Green Tea",
      "tea",
      "Beverages › Tea › Green Tea",
      "loose leaf|tea bags|matcha blend|caffeine free",
      [FOOD_SIZE],
      5,
      30,
    ],
    [
      "beef jerky",
      "Beef Jerky",
      "beef jerky",
      "Meat & Seafood › Jerky",
      "grass fed|teriyaki style|resealable bag|zero sugar",
      [FLAVOR, FOOD_SIZE],
      8,
      45,
    ],
    [
      "trail mix",
      "Trail Mix",
      "trail mix",
      "Snack Foods › Nuts & Seeds › Trail Mix",
      "roasted nuts|dried fruit|individually wrapped|no added salt",
      [FOOD_SIZE],
      6,
      30,
    ],
    [
      "olive oil",
      "Olive Oil",
      "olive oil",
      "Pantry Staples › Oils › Olive Oil",
      "extra virgin|cold pressed|glass bottle|first harvest",
      [FOOD_SIZE],
      9,
      50,
    ],
    [
      "dark chocolate",
      "Dark Chocolate",
      "chocolate",
      "Snack Foods › Candy › Chocolate",
      "rich cocoa|gift box|fair trade certified|single serve",
      [],
      5,
      35,
    ],
    [
      "raw honey",
      "Raw Honey",
      "honey",
      "Pantry Staples › Honey & Syrups",
      "unfiltered|manuka blend|squeeze bottle|local farms",
      [FOOD_SIZE],
      8,
      45,
    ],
  ],
  furniture: [
    [
      "office chair",
      "Office Chair",
      "office chair",
      "Home Office Furniture › Chairs",
      "lumbar support|adjustable height|mesh back|swivel base",
      [COLOR],
      60,
      250,
    ],
    [
      "coffee table",
      "Coffee Table",
      "coffee table",
      "Living Room Furniture › Tables",
      "storage shelf|lift top|tempered glass|rustic finish",
      [WOOD_COLOR],
      45,
      220,
    ],
    [
      "bookshelf",
      "Bookshelf",
      "bookshelf",
      "Home Office Furniture › Bookcases",
      "five tier|open shelving|anti tip|industrial style",
      [WOOD_COLOR],
      35,
      180,
    ],
    [
      "bed frame",
      "Bed Frame",
      "bed frame",
      "Bedroom Furniture › Beds & Frames",
      "noise free|under bed storage|wooden slats|headboard included",
      [BED_SIZE],
      80,
      400,
    ],
    [
      "tv stand",
      "TV Stand",
      "tv stand",
      "Living Room Furniture › TV Stands",
      "cable management|glass doors|led lights|entertainment center",
      [WOOD_COLOR],
      50,
      260,
    ],
    [
      "bar stools",
      "Bar Stools",
      "bar stools",
      "Kitchen Furniture › Stools",
      "counter height|set of 2|swivel seat|footrest ring",
      [COLOR],
      40,
      200,
    ],
    [
      "nightstand",
      "Nightstand",
      "nightstand",
      "Bedroom Furniture › Nightstands",
      "two drawers|charging station|open cubby|compact size",
      [WOOD_COLOR],
      30,
      150,
    ],
    [
      "sofa",
      "Sofa",
      "sofa",
      "Living Room Furniture › Sofas & Couches",
      "pull out bed|velvet fabric|removable cushions|tufted back",
      [],
      180,
      900,
    ],
  ],
  electronics: [
    [
      "bluetooth speaker",
      "Bluetooth Speaker",
      "bluetooth speaker",
      "Portable Audio › Speakers",
      "waterproof|bass boost|stereo pairing|built in microphone",
      [COLOR],
      20,
      150,
    ],
    [
      "wireless earbuds",
      "Wireless Earbuds",
      "earbuds",
      "Headphones › Earbud Headphones",
      "noise cancelling|charging case|touch control|sweat resistant",
      [COLOR],
      20,
      180,
    ],
    [
      "usb c cable",
      "USB C Cable",
      "usb cable",
      "Computers › Cables › USB Cables",
      "braided nylon|data sync|right angle|tangle free",
      [CABLE_LENGTH],
      5,
      25,
    ],
    [
      "phone case",
      "Phone Case",
      "phone case",
      "Cell Phones › Cases & Covers",
      "shockproof|clear back|card holder|magnetic mount",
      [COLOR],
      7,
      40,
    ],
    [
      "power bank",
      "Power Bank",
      "power bank",
      "Cell Phones › Chargers › Power Banks",
      "high capacity|dual usb|led display|slim profile",
      [COLOR],
      15,
      70,
    ],
    [
      "wireless mouse",
      "Wireless Mouse",
      "mouse",
      "Computers › Mice",
      "silent click|ergonomic design|usb receiver|rechargeable battery",
      [COLOR],
      10,
      60,
    ],
    [
      "hdmi cable",
      "HDMI Cable",
      "hdmi cable",
      "Television & Video › Cables › HDMI Cables",
      "4k resolution|gold plated|high speed|ethernet channel",
      [CABLE_LENGTH],
      6,
      35,
    ],
    [
      "memory card",
      "Memory Card",
      "memory card",
      "Computers › Memory Cards › Micro SD",
      "class 10|u3 speed|sd adapter|4k video",
      [CAPACITY],
      8,
      80,
    ],
  ],
};

/** Every product type, category by category, in a fixed order. */
export const PRODUCT_TYPES: readonly ProductType[] = CATEGORIES.flatMap((category) =>
  TYPE_ROWS[category].map(
    ([query, title, nouns, path, attributes, options, low, high]): ProductType => ({
      category,
      query,
      title,
      nouns: nouns.split(" "),
      productCategory: `${ROOTS[category]} › ${path}`,
      attributes: [...attributes.split("|"), ...SHARED_ATTRIBUTES[category]],
      options,
      price: [low, high],
    }),
  ),
);

const BRAND_SYLLABLES: Record<Category, readonly string[]> = {
  fashion: ["lu", "ve", "ra", "mo", "ni", "sa", "ta", "lo"],
  beauty: ["bel", "fi", "ora", "li", "sy", "ne", "ama", "ri"],
  food: ["gro", "ha", "ku", "mi", "po", "de", "fa", "nu"],
  furniture: ["hol", "ma", "wo", "den", "ar", "ki", "tre", "vo"],
  electronics: ["zen", "tek", "vox", "ion", "qu", "ex", "tro", "jy"],
};

/**
 * Brand names of a category: two made-up syllables plus a suffix ("Luvex"). Categories
 * draw from different syllables, so no brand (a proper noun of the title) is shared across
 * categories.
 */
export function brandsOf(category: Category): string[] {
  const syllables = BRAND_SYLLABLES[category];
  const suffixes = ["x", "n", "ro", "sa"];
  const brands: string[] = [];
  for (const first of syllables) {
    for (const second of syllables) {
      if (first === second) continue;
      for (const suffix of suffixes) {
        const word = `${first}${second}${suffix}`;
        brands.push(word[0].toUpperCase() + word.slice(1));
      }
    }
  }
  return brands;
}

/** The second half of a feature bullet; none contains an attribute phrase. */
export const BULLET_TAILS = [
  "made to last",
  "a customer favorite",
  "as shown in the photos",
  "checked before shipping",
  "for daily comfort",
  "loved by reviewers",
] as const;

/** Bullets that say nothing about attributes. */
export const FILLER_BULLETS = [
  "Satisfaction guaranteed or your money back",
  "Ships in recyclable packaging",
  "Backed by a 30 day return policy",
  "Designed in California",
] as const;

export const REVIEW_LINES = [
  "Exactly as described.",
  "Good value for the money.",
  "Arrived on time and works well.",
  "Would buy again.",
  "Not bad, but the packaging was damaged.",
  "My second one, still happy.",
] as const;

/** Words that open a goal instruction, as in the human-written WebShop goals. */
export const INSTRUCTION_OPENINGS = [
  "i need",
  "i want",
  "i am looking for",
  "i would like",
  "find me",
] as const;
