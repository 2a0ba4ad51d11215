<?php

declare(strict_types=1);

namespace Idem;

/**
 * RFC 8785 (JSON Canonicalization Scheme): object members sorted by the
 * UTF-16 code units of their names, no whitespace, numbers as ECMAScript
 * shortest round-trip doubles, strings with minimal escaping. The same
 * bytes as idem's Go package key and every other idem client.
 */
final class Canonical
{
    /** The deepest nesting of arrays and objects fromJson accepts, as Go's package key. */
    public const MAX_DEPTH = 10000;

    /** One JSON token: a string, a number, a literal, a structural character, or (else) a byte that starts none. */
    private const TOKEN = '/\G[ \t\n\r]*+(?:("(?:[^"\\\\]++|\\\\.)*+")|(-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?)|(true|false|null)|([{}\[\]:,])|(.))/s';

    /**
     * Canonical JSON of JSON text, exactly as Go's key.Canonicalize: strict
     * RFC 8259 (objects stay objects, even when empty; member names may hold
     * U+0000); duplicate member names, lone surrogates, invalid UTF-8,
     * numbers beyond the double range and nesting deeper than MAX_DEPTH throw
     * InvalidArgumentException.
     */
    public static function fromJson(string $json): string
    {
        if (preg_match_all(self::TOKEN, $json, $m, PREG_SET_ORDER | PREG_UNMATCHED_AS_NULL) === false) {
            throw new \InvalidArgumentException('invalid JSON: ' . preg_last_error_msg());
        }
        $used = 0;
        foreach ($m as $t) {
            $used += strlen($t[0]);
        }
        if (strspn($json, " \t\n\r", $used) !== strlen($json) - $used) {
            throw new \InvalidArgumentException('invalid JSON: unexpected character at offset ' . $used);
        }
        $pos = 0;
        $out = self::parseValue($m, $pos, 0);
        if ($pos !== count($m)) {
            throw new \InvalidArgumentException('invalid JSON: trailing data');
        }
        return $out;
    }

    /**
     * parseValue returns the canonical form of the value whose first token
     * is $tokens[$pos] and moves $pos past it.
     *
     * @param list<array<int, string|null>> $tokens matches of TOKEN
     */
    private static function parseValue(array $tokens, int &$pos, int $depth): string
    {
        $t = $tokens[$pos++] ?? throw new \InvalidArgumentException('invalid JSON: unexpected end of input');
        if ($t[1] !== null) {
            return self::string(self::decodeString($t[1]));
        }
        if ($t[2] !== null) {
            $f = (float) $t[2];
            if (is_infinite($f)) {
                throw new \InvalidArgumentException("invalid JSON: number {$t[2]} out of range");
            }
            return self::number($f);
        }
        if ($t[3] !== null) {
            return $t[3];
        }
        if ($t[4] === '[' || $t[4] === '{') {
            if (++$depth > self::MAX_DEPTH) {
                throw new \InvalidArgumentException('invalid JSON: nesting deeper than ' . self::MAX_DEPTH);
            }
            return $t[4] === '[' ? self::parseArray($tokens, $pos, $depth) : self::parseObject($tokens, $pos, $depth);
        }
        throw new \InvalidArgumentException('invalid JSON: unexpected ' . var_export($t[0], true));
    }

    /** @param list<array<int, string|null>> $tokens */
    private static function parseArray(array $tokens, int &$pos, int $depth): string
    {
        $items = [];
        if (($tokens[$pos][4] ?? null) === ']') {
            $pos++;
            return '[]';
        }
        for (;;) {
            $items[] = self::parseValue($tokens, $pos, $depth);
            $sep = $tokens[$pos++][4] ?? null;
            if ($sep === ']') {
                return '[' . implode(',', $items) . ']';
            }
            if ($sep !== ',') {
                throw new \InvalidArgumentException("invalid JSON: expected ',' or ']'");
            }
        }
    }

    /** @param list<array<int, string|null>> $tokens */
    private static function parseObject(array $tokens, int &$pos, int $depth): string
    {
        $members = [];
        if (($tokens[$pos][4] ?? null) === '}') {
            $pos++;
            return '{}';
        }
        for (;;) {
            $name = $tokens[$pos++][1] ?? throw new \InvalidArgumentException('invalid JSON: expected a member name');
            $name = self::decodeString($name);
            if (isset($members[$name])) {
                throw new \InvalidArgumentException('invalid JSON: duplicate member name ' . self::string($name));
            }
            if (($tokens[$pos++][4] ?? null) !== ':') {
                throw new \InvalidArgumentException("invalid JSON: expected ':'");
            }
            $members[$name] = self::parseValue($tokens, $pos, $depth);
            $sep = $tokens[$pos++][4] ?? null;
            if ($sep === '}') {
                return self::object($members);
            }
            if ($sep !== ',') {
                throw new \InvalidArgumentException("invalid JSON: expected ',' or '}'");
            }
        }
    }

    /** The value of a JSON string token; json_decode checks its escapes, UTF-8 and surrogates. */
    private static function decodeString(string $token): string
    {
        try {
            return json_decode($token, false, 1, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException('invalid JSON: ' . $e->getMessage(), 0, $e);
        }
    }

    /**
     * A canonical object of its members: name => canonical value, sorted by
     * the UTF-16 code units of the names.
     *
     * @param array<array-key, string> $members
     */
    private static function object(array $members): string
    {
        $sorted = [];
        foreach ($members as $k => $val) {
            $k = (string) $k;
            $sorted[] = [self::utf16be($k), $k, $val];
        }
        usort($sorted, fn (array $a, array $b): int => strcmp($a[0], $b[0]));
        $out = [];
        foreach ($sorted as [, $k, $val]) {
            $out[] = self::string($k) . ':' . $val;
        }
        return '{' . implode(',', $out) . '}';
    }

    /**
     * Canonical JSON of a PHP value: null, bool, int, float, string, list
     * arrays (JSON arrays), other arrays and objects (JSON objects;
     * JsonSerializable is honoured). Integers are doubles, as in JSON: send
     * ids beyond 2^53 as strings.
     */
    public static function encode(mixed $v): string
    {
        if ($v instanceof \JsonSerializable) {
            $v = $v->jsonSerialize();
        }
        if ($v === null) {
            return 'null';
        }
        if (is_bool($v)) {
            return $v ? 'true' : 'false';
        }
        if (is_int($v) || is_float($v)) {
            return self::number((float) $v);
        }
        if (is_string($v)) {
            return self::string($v);
        }
        if (is_array($v) && array_is_list($v)) {
            return '[' . implode(',', array_map([self::class, 'encode'], $v)) . ']';
        }
        if (is_array($v) || is_object($v)) {
            $members = [];
            foreach ((is_object($v) ? get_object_vars($v) : $v) as $k => $val) {
                if (is_object($v) && str_starts_with((string) $k, "\0")) {
                    continue; // json_encode leaves such properties out of an object
                }
                $members[$k] = self::encode($val);
            }
            return self::object($members);
        }
        throw new \InvalidArgumentException('cannot canonicalize a ' . get_debug_type($v));
    }

    /** The ECMAScript Number::toString of a finite double. */
    public static function number(float $f): string
    {
        if (is_nan($f) || is_infinite($f)) {
            throw new \InvalidArgumentException('NaN and infinities are not JSON');
        }
        if ($f == 0.0) {
            return '0';
        }
        $sign = $f < 0 ? '-' : '';
        // The shortest decimal that round-trips (serialize_precision -1).
        $old = ini_set('serialize_precision', '-1');
        $repr = var_export(abs($f), true);
        ini_set('serialize_precision', (string) $old);
        $repr = strtolower($repr);
        $exp = 0;
        if (($p = strpos($repr, 'e')) !== false) {
            $exp = (int) substr($repr, $p + 1);
            $repr = substr($repr, 0, $p);
        }
        $dot = strpos($repr, '.');
        $intPart = $dot === false ? $repr : substr($repr, 0, $dot);
        $frac = $dot === false ? '' : substr($repr, $dot + 1);
        $digits = $intPart . $frac;
        $n = strlen($intPart) + $exp; // value = 0.DIGITS × 10^n
        $lead = strlen($digits) - strlen(ltrim($digits, '0'));
        $digits = ltrim($digits, '0');
        $n -= $lead;
        $digits = rtrim($digits, '0');
        $k = strlen($digits);
        if ($k <= $n && $n <= 21) {
            return $sign . $digits . str_repeat('0', $n - $k);
        }
        if (0 < $n && $n <= 21) {
            return $sign . substr($digits, 0, $n) . '.' . substr($digits, $n);
        }
        if (-6 < $n && $n <= 0) {
            return $sign . '0.' . str_repeat('0', -$n) . $digits;
        }
        $e = $n - 1;
        $m = $k === 1 ? $digits : $digits[0] . '.' . substr($digits, 1);
        return $sign . $m . 'e' . ($e < 0 ? '-' : '+') . abs($e);
    }

    /** A JSON string with RFC 8785's minimal escaping. */
    public static function string(string $s): string
    {
        if (!preg_match('//u', $s)) {
            throw new \InvalidArgumentException('string is not valid UTF-8');
        }
        $out = preg_replace_callback('/[\x00-\x1f"\\\\]/', static function (array $m): string {
            return match ($m[0]) {
                '"' => '\\"',
                '\\' => '\\\\',
                "\x08" => '\\b',
                "\x0c" => '\\f',
                "\n" => '\\n',
                "\r" => '\\r',
                "\t" => '\\t',
                default => sprintf('\\u%04x', ord($m[0])),
            };
        }, $s);
        return '"' . $out . '"';
    }

    /** UTF-16BE bytes of a UTF-8 string: byte order = code-unit order. */
    private static function utf16be(string $s): string
    {
        $out = '';
        $cps = preg_split('//u', $s, -1, PREG_SPLIT_NO_EMPTY);
        if ($cps === false) {
            throw new \InvalidArgumentException('member name is not valid UTF-8');
        }
        foreach ($cps as $ch) {
            $b = array_values(unpack('C*', $ch) ?: []);
            $cp = match (count($b)) {
                1 => $b[0],
                2 => (($b[0] & 0x1f) << 6) | ($b[1] & 0x3f),
                3 => (($b[0] & 0x0f) << 12) | (($b[1] & 0x3f) << 6) | ($b[2] & 0x3f),
                default => (($b[0] & 0x07) << 18) | (($b[1] & 0x3f) << 12) | (($b[2] & 0x3f) << 6) | ($b[3] & 0x3f),
            };
            if ($cp >= 0x10000) {
                $cp -= 0x10000;
                $out .= pack('nn', 0xd800 | ($cp >> 10), 0xdc00 | ($cp & 0x3ff));
            } else {
                $out .= pack('n', $cp);
            }
        }
        return $out;
    }
}
