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
    /** Canonical JSON of JSON text (objects stay objects, even when empty). */
    public static function fromJson(string $json): string
    {
        try {
            $v = json_decode($json, false, 512, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException('invalid JSON: ' . $e->getMessage(), 0, $e);
        }
        return self::encode($v);
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
                $k = (string) $k;
                $members[] = [self::utf16be($k), $k, $val];
            }
            usort($members, fn (array $a, array $b): int => strcmp($a[0], $b[0]));
            $out = [];
            foreach ($members as [, $k, $val]) {
                $out[] = self::string($k) . ':' . self::encode($val);
            }
            return '{' . implode(',', $out) . '}';
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
