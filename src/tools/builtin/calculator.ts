import type { ToolDefinition } from "../types.js";

/**
 * A safe arithmetic evaluator: a tokenizer and a recursive-descent parser that computes as it
 * parses. Nothing is ever passed to eval or Function, and names are looked up in two fixed maps,
 * so `constructor` or `process` are just unknown names. Positions in errors count from 0.
 */

const MAX_LENGTH = 500;
const MAX_DEPTH = 100;

const CONSTANTS = new Map<string, number>([
  ["pi", Math.PI],
  ["e", Math.E],
]);

type MathFunction = { minArguments: number; maxArguments: number; apply: (...args: number[]) => number };
const unary = (apply: (x: number) => number): MathFunction => ({ minArguments: 1, maxArguments: 1, apply });
const FUNCTIONS = new Map<string, MathFunction>([
  ["sqrt", unary(Math.sqrt)],
  ["abs", unary(Math.abs)],
  ["round", { minArguments: 1, maxArguments: 2, apply: roundTo }],
  ["floor", unary(Math.floor)],
  ["ceil", unary(Math.ceil)],
  ["min", { minArguments: 1, maxArguments: Infinity, apply: Math.min }],
  ["max", { minArguments: 1, maxArguments: Infinity, apply: Math.max }],
  ["log", unary(Math.log10)],
  ["ln", unary(Math.log)],
  ["exp", unary(Math.exp)],
  ["sin", unary(Math.sin)],
  ["cos", unary(Math.cos)],
  ["tan", unary(Math.tan)],
]);

type Token = { kind: "number" | "name" | "symbol" | "end"; text: string; position: number };
// Whitespace, then a number (1, 1.5, .5, 1e3), a name, or an operator.
const TOKEN = /\s*(?:(\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)|([a-z_][a-z0-9_]*)|(\*\*|[-+*/%^(),]))/iy;

/** Evaluates an arithmetic expression; throws an Error whose message says what is wrong and where. */
export function evaluateExpression(expression: string): number {
  if (expression.length > MAX_LENGTH) {
    throw new Error(`Expression is too long (${expression.length} characters; the limit is ${MAX_LENGTH})`);
  }
  if (expression.trim() === "") throw new Error("Expression is empty");
  const result = new Parser(expression).parse();
  // 15 significant digits hide binary noise: 0.1 + 0.2 gives 0.3. Near the largest double that
  // rounding goes up past it (1.7976931348623157e308 -> Infinity), so such a result stays as it is.
  const rounded = Number(result.toPrecision(15));
  return Number.isFinite(rounded) ? rounded : result;
}

class Parser {
  private position = 0;
  private depth = 0;
  private token: Token;

  constructor(private readonly source: string) {
    this.token = this.readToken();
  }

  parse(): number {
    const value = this.parseSum();
    if (this.token.kind !== "end") this.unexpected();
    return value;
  }

  private parseSum(): number {
    let value = this.parseProduct();
    while (this.isSymbol("+", "-")) {
      const operator = this.advance().text;
      const right = this.parseProduct();
      value = finite(operator === "+" ? value + right : value - right, operator);
    }
    return value;
  }

  private parseProduct(): number {
    let value = this.parseUnary();
    while (this.isSymbol("*", "/", "%")) {
      const operator = this.advance().text;
      const right = this.parseUnary();
      if (operator !== "*" && right === 0) throw new Error("Division by zero");
      value = finite(operator === "*" ? value * right : operator === "/" ? value / right : value % right, operator);
    }
    return value;
  }

  // Unary minus binds looser than power (-2^2 is -4) and the exponent may be signed (2^-1).
  private parseUnary(): number {
    if (this.isSymbol("+", "-")) return this.advance().text === "-" ? -this.parseUnary() : this.parseUnary();
    const base = this.parsePrimary();
    if (!this.isSymbol("^", "**")) return base;
    this.advance();
    return finite(base ** this.parseUnary(), "^"); // right-associative: 2^3^2 is 2^9
  }

  private parsePrimary(): number {
    const token = this.token;
    if (token.kind === "number") {
      this.advance();
      // A literal beyond the largest double (1e999) reads as Infinity; it must not go on as a number.
      return finite(Number(token.text), token.text, `The number '${token.text}' at position ${token.position}`);
    }
    if (token.kind === "name") return this.parseName(token);
    if (this.isSymbol("(")) return this.inParentheses(() => this.parseSum());
    return this.unexpected();
  }

  private parseName(token: Token): number {
    const name = token.text.toLowerCase();
    const isCall = /^\s*\(/.test(this.source.slice(this.position));
    if (!isCall) {
      const constant = CONSTANTS.get(name);
      if (constant !== undefined) {
        this.advance();
        return constant;
      }
      if (FUNCTIONS.has(name))
        throw new Error(`Function '${name}' needs its arguments in parentheses, e.g. ${name}(2)`);
      throw new Error(`Unknown name '${token.text}' at position ${token.position}; the constants are pi and e`);
    }
    const fn = FUNCTIONS.get(name);
    if (fn === undefined) {
      throw new Error(`Unknown function '${token.text}'; the functions are ${[...FUNCTIONS.keys()].join(", ")}`);
    }
    this.advance();
    const args = this.inParentheses(() => {
      if (this.isSymbol(")")) return [];
      const values = [this.parseSum()];
      while (this.isSymbol(",")) {
        this.advance();
        values.push(this.parseSum());
      }
      return values;
    });
    if (args.length < fn.minArguments || args.length > fn.maxArguments) {
      const expected =
        fn.maxArguments === Infinity
          ? `at least ${fn.minArguments}`
          : fn.minArguments === fn.maxArguments
            ? `${fn.minArguments}`
            : `${fn.minArguments} or ${fn.maxArguments}`;
      throw new Error(`Function '${name}' takes ${expected} argument(s), got ${args.length}`);
    }
    return finite(fn.apply(...args), name);
  }

  private inParentheses<T>(parse: () => T): T {
    if (!this.isSymbol("(")) this.unexpected();
    if (++this.depth > MAX_DEPTH)
      throw new Error(`Expression is nested too deeply (more than ${MAX_DEPTH} levels of parentheses)`);
    this.advance();
    const value = parse();
    if (!this.isSymbol(")")) this.unexpected();
    this.advance();
    this.depth--;
    return value;
  }

  private isSymbol(...symbols: string[]): boolean {
    return this.token.kind === "symbol" && symbols.includes(this.token.text);
  }

  private advance(): Token {
    const token = this.token;
    this.token = this.readToken();
    return token;
  }

  private unexpected(): never {
    if (this.token.kind === "end") throw new Error("Unexpected end of expression");
    throw new Error(`Unexpected token '${this.token.text}' at position ${this.token.position}`);
  }

  private readToken(): Token {
    TOKEN.lastIndex = this.position;
    const match = TOKEN.exec(this.source);
    if (match === null) {
      const start = this.source.length - this.source.slice(this.position).trimStart().length;
      if (start === this.source.length) return { kind: "end", text: "", position: start };
      throw new Error(`Unexpected character '${this.source[start]}' at position ${start}`);
    }
    this.position = TOKEN.lastIndex;
    const [, number, name, symbol] = match;
    const text = number ?? name ?? symbol ?? "";
    const kind = number !== undefined ? "number" : name !== undefined ? "name" : "symbol";
    return { kind, text, position: this.position - text.length };
  }
}

/**
 * Every literal and every intermediate result passes here: an Infinity or NaN would otherwise be
 * carried on and come out of JSON as null, which the model cannot tell from an answer.
 */
function finite(value: number, operation: string, subject = `The result of '${operation}'`): number {
  if (Number.isNaN(value)) {
    throw new Error(
      `${subject} is not a finite number: it is undefined in real numbers (NaN), as the square root or logarithm of a negative number is; check the arguments`,
    );
  }
  if (!Number.isFinite(value)) {
    throw new Error(
      `${subject} is not a finite number: it is too large to represent (beyond ±1.8e308) or infinite (as ln(0) is); ` +
        "rewrite it with smaller numbers, e.g. compare logarithms (log(9) * 9^9 instead of 9^9^9) or use larger units",
    );
  }
  return value;
}

// Math.round(x * 10^digits) overflows or underflows for a large |digits| although the answer fits:
// round(1e300, 10) is 1e300 and round(1, -400) is 0.
function roundTo(x: number, digits = 0): number {
  const scale = 10 ** digits;
  if (scale === 0) return 0;
  const scaled = x * scale;
  // From 2^52 up every double is already whole, so there is nothing to round.
  if (!Number.isFinite(scaled) || Math.abs(scaled) >= 2 ** 52) return x;
  return Math.round(scaled) / scale;
}

export const calculator: ToolDefinition<{ expression: string }> = {
  name: "calculator",
  description:
    "Evaluates an arithmetic expression and returns the exact result. Use it for any arithmetic instead of " +
    "computing in your head. Supports + - * / % and ^ (power), parentheses, the constants pi and e, and the " +
    "functions sqrt, abs, round(x[, digits]), floor, ceil, min, max, log (base 10), ln, exp, sin, cos, tan (radians).",
  parameters: {
    type: "object",
    properties: {
      expression: {
        type: "string",
        description: "The expression, e.g. (12.5 * 3) / 4 + sqrt(16)",
        minLength: 1,
        maxLength: MAX_LENGTH,
      },
    },
    required: ["expression"],
    additionalProperties: false,
  },
  handler: async ({ expression }) => ({ expression, result: evaluateExpression(expression) }),
};
