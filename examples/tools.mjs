// An example tool module: it default-exports an array of plain tool objects and imports nothing
// from glassbox. Load it with `glassbox run "..." --tools examples/tools.mjs` or GLASSBOX_TOOLS.

const inventory = new Map([
  ["apple", 12],
  ["pear", 0],
  ["plum", 7],
]);

export default [
  {
    name: "check_stock",
    description: "Returns how many units of a fruit are in stock.",
    parameters: {
      type: "object",
      properties: { fruit: { type: "string", description: "The fruit, e.g. apple" } },
      required: ["fruit"],
      additionalProperties: false,
    },
    handler: async ({ fruit }) => {
      const units = inventory.get(fruit.toLowerCase());
      if (units === undefined) throw new Error(`Unknown fruit '${fruit}'; known: ${[...inventory.keys()].join(", ")}`);
      return { fruit, units };
    },
  },
  {
    name: "restock",
    description: "Orders more units of a fruit from the supplier. Needs approval.",
    dangerous: true,
    parameters: {
      type: "object",
      properties: { fruit: { type: "string" }, units: { type: "integer", minimum: 1, maximum: 100 } },
      required: ["fruit", "units"],
      additionalProperties: false,
    },
    handler: async ({ fruit, units }) => {
      inventory.set(fruit, (inventory.get(fruit) ?? 0) + units);
      return { fruit, units: inventory.get(fruit) };
    },
  },
];
