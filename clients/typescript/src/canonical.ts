// RFC 8785 (JSON Canonicalization Scheme), byte for byte as idem's Go
// package key: object members sorted by the UTF-16 code units of their
// names, no white space, numbers as ECMAScript prints doubles, strings with
// the minimal escapes. The parser is as strict as Go's: JSON.parse would
// take duplicate member names (the last wins), lone surrogates and
// numbers beyond the double range (Infinity), which Go refuses.

/** CanonicalError: the input is not strict JSON, or not canonicalizable. */
export class CanonicalError extends Error {
  constructor(message: string) {
    super(`invalid json: ${message}`);
    this.name = "CanonicalError";
  }
}

/** The deepest nesting of arrays and objects accepted, as Go's package key. */
export const maxDepth = 10000;

/** A container being parsed: its canonical items, or its members by name. */
type Frame = { items: string[] } | { members: Map<string, string>; name: string | undefined };

const numberRe = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * canonicalize returns the canonical form of JSON text (a string, or UTF-8
 * bytes). It throws CanonicalError for what Go's key.Canonicalize refuses:
 * syntax errors, trailing data, invalid UTF-8, lone surrogates, duplicate
 * member names (also when spelled with escapes), numbers beyond the double
 * range, and nesting deeper than maxDepth.
 */
export function canonicalize(json: string | Uint8Array): string {
  const text = typeof json === "string" ? json : decodeUTF8(json);
  return new Parser(text).document();
}

/**
 * canonicalValue returns the canonical form of a value as JSON.stringify
 * renders it (toJSON is honoured; undefined members are left out).
 */
export function canonicalValue(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new CanonicalError(`${typeof value} is not JSON`);
  return canonicalize(text);
}

function decodeUTF8(b: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(b);
  } catch {
    throw new CanonicalError("invalid UTF-8");
  }
}

/** The canonical text of an object's members: sorted by UTF-16 code units. */
function objectText(members: Map<string, string>): string {
  const names = [...members.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${names.map((n) => `${JSON.stringify(n)}:${members.get(n) ?? ""}`).join(",")}}`;
}

class Parser {
  private pos = 0;
  private readonly stack: Frame[] = [];

  constructor(private readonly s: string) {}

  private fail(what: string): never {
    throw new CanonicalError(`${what} at offset ${this.pos}`);
  }

  private space(): void {
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      this.pos++;
    }
  }

  /** document parses one value with nothing but white space around it. */
  document(): string {
    this.space();
    const out = this.value();
    this.space();
    if (this.pos !== this.s.length) this.fail("trailing data");
    return out;
  }

  /**
   * value parses one value. Containers are kept on an explicit stack, not
   * the call stack, so nesting up to maxDepth cannot overflow it.
   */
  private value(): string {
    for (;;) {
      let done: string | undefined = this.open();
      // Close every container this value completes.
      while (done !== undefined) {
        const top = this.stack[this.stack.length - 1];
        if (top === undefined) return done;
        done = this.add(top, done);
      }
    }
  }

  /** open parses a scalar (returned) or opens a container (undefined). */
  private open(): string | undefined {
    this.space();
    const c = this.s[this.pos];
    if (c === "[" || c === "{") {
      if (this.stack.length >= maxDepth) this.fail(`nesting deeper than ${maxDepth}`);
      this.pos++;
      this.space();
      if (this.s[this.pos] === (c === "[" ? "]" : "}")) {
        this.pos++;
        return c === "[" ? "[]" : "{}";
      }
      const frame: Frame = c === "[" ? { items: [] } : { members: new Map(), name: undefined };
      this.stack.push(frame);
      if ("members" in frame) frame.name = this.memberName();
      return undefined;
    }
    return this.scalar();
  }

  /** add adds a finished value to the open container; the container's text when it closes. */
  private add(top: Frame, v: string): string | undefined {
    if ("items" in top) top.items.push(v);
    else top.members.set(top.name ?? "", v);
    this.space();
    const c = this.s[this.pos++];
    const close = "items" in top ? "]" : "}";
    if (c === ",") {
      if ("members" in top) top.name = this.memberName();
      return undefined;
    }
    if (c !== close) {
      this.pos--;
      this.fail(`expected ',' or '${close}'`);
    }
    this.stack.pop();
    return "items" in top ? `[${top.items.join(",")}]` : objectText(top.members);
  }

  /** memberName parses `"name" :` of the open object, refusing a duplicate. */
  private memberName(): string {
    this.space();
    if (this.s[this.pos] !== '"') this.fail("expected member name");
    const name = this.string();
    const top = this.stack[this.stack.length - 1];
    if (top && "members" in top && top.members.has(name)) this.fail(`duplicate member name ${JSON.stringify(name)}`);
    this.space();
    if (this.s[this.pos] !== ":") this.fail("expected ':'");
    this.pos++;
    return name;
  }

  private scalar(): string {
    const c = this.s[this.pos];
    if (c === '"') return JSON.stringify(this.string());
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      numberRe.lastIndex = this.pos;
      const m = numberRe.exec(this.s);
      if (!m) this.fail("invalid number");
      const f = Number(m[0]);
      if (!Number.isFinite(f)) this.fail(`number ${m[0].slice(0, 32)} out of range`);
      this.pos += m[0].length;
      return String(f); // ECMAScript's Number::toString; -0 prints as 0
    }
    for (const lit of ["true", "false", "null"]) {
      if (this.s.startsWith(lit, this.pos)) {
        this.pos += lit.length;
        return lit;
      }
    }
    if (c === undefined) this.fail("unexpected end of input");
    return this.fail(`unexpected character ${JSON.stringify(c)}`);
  }

  /** string parses a JSON string at pos (a '"') and returns its value. */
  private string(): string {
    this.pos++;
    let out = "";
    let start = this.pos;
    for (;;) {
      if (this.pos >= this.s.length) this.fail("unterminated string");
      const c = this.s.charCodeAt(this.pos);
      if (c === 0x22) break;
      if (c < 0x20) this.fail("control character in string");
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = this.s.charCodeAt(this.pos + 1);
        if (c > 0xdbff || !(d >= 0xdc00 && d <= 0xdfff)) this.fail("lone surrogate in string");
        this.pos += 2;
        continue;
      }
      if (c !== 0x5c) {
        this.pos++;
        continue;
      }
      out += this.s.slice(start, this.pos);
      out += this.escape();
      start = this.pos;
    }
    out += this.s.slice(start, this.pos);
    this.pos++;
    return out;
  }

  /** escape decodes the escape sequence at pos (a '\'). */
  private escape(): string {
    const e = this.s[this.pos + 1];
    const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
    if (e !== undefined && e in simple) {
      this.pos += 2;
      return simple[e] ?? "";
    }
    if (e !== "u") this.fail("invalid escape");
    const hi = this.hex4(this.pos + 2);
    this.pos += 6;
    if (hi < 0xd800 || hi > 0xdfff) return String.fromCharCode(hi);
    if (hi > 0xdbff || this.s[this.pos] !== "\\" || this.s[this.pos + 1] !== "u") this.fail("lone surrogate escape");
    const lo = this.hex4(this.pos + 2);
    if (lo < 0xdc00 || lo > 0xdfff) this.fail("lone surrogate escape");
    this.pos += 6;
    return String.fromCharCode(hi, lo);
  }

  private hex4(at: number): number {
    const h = this.s.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) this.fail("invalid \\u escape");
    return parseInt(h, 16);
  }
}
