<?php

declare(strict_types=1);

namespace Idem;

/** Idempotency and lock keys computed as idem's Go package key does. */
final class Keys
{
    /** Lowercase hex SHA-256 of the canonical JSON of a payload. */
    public static function hash(mixed $payload): string
    {
        return hash('sha256', Canonical::encode($payload));
    }

    /** hashJson is hash of JSON text. */
    public static function hashJson(string $json): string
    {
        return hash('sha256', Canonical::fromJson($json));
    }

    /**
     * Seed 002's key: {tenant}_{user}_{action}_{first 16 hex of the SHA-256
     * of the canonical payload}. A null tenant or user is an empty
     * component. tenant and user must not contain '_'.
     */
    public static function scoped(?string $tenant, ?string $user, string $action, mixed $payload): string
    {
        return self::scopedHash($tenant, $user, $action, self::hash($payload));
    }

    /** scopedJson is scoped with the payload as JSON text. */
    public static function scopedJson(?string $tenant, ?string $user, string $action, string $payloadJson): string
    {
        return self::scopedHash($tenant, $user, $action, self::hashJson($payloadJson));
    }

    private static function scopedHash(?string $tenant, ?string $user, string $action, string $hash): string
    {
        $tenant ??= '';
        $user ??= '';
        if ($tenant !== '') {
            self::checkPart('tenant', $tenant, '_');
        }
        if ($user !== '') {
            self::checkPart('user', $user, '_');
        }
        self::checkPart('action', $action, '');
        return $tenant . '_' . $user . '_' . $action . '_' . substr($hash, 0, 16);
    }

    /** Seed 001's content key: {prefix}_{sha256 of the canonical payload}. */
    public static function content(string $prefix, mixed $payload): string
    {
        self::checkPart('prefix', $prefix, '');
        return $prefix . '_' . self::hash($payload);
    }

    /**
     * Seed 004's lock key, Go's key.Lock:
     * {function}:{tenant}:{grain date of $time in $zone}[:{entity hash}], e.g.
     * "detect-alerts:tenant-abc123:2026-02-06:971121298e66". $grain is "day"
     * (Y-m-d), "hour" (Y-m-d\TH) or "minute" (Y-m-d\TH:i); $zone is a
     * DateTimeZone or an IANA name (null: UTC); $time a DateTimeInterface or
     * a date-time string. $entities is an object (array or stdClass; pass
     * new \stdClass() for {}); null leaves the hash part and its ':' out.
     * function and tenant must not contain ':'.
     */
    public static function lock(string $function, string $tenant, \DateTimeInterface|string $time, \DateTimeZone|string|null $zone, string $grain, mixed $entities): string
    {
        $k = self::lockPrefix($function, $tenant, $time, $zone, $grain);
        return $entities === null ? $k : $k . ':' . self::entityHash($entities);
    }

    /** lockJson is lock with the entities as JSON text; null, "" or the JSON null leave the hash out. */
    public static function lockJson(string $function, string $tenant, \DateTimeInterface|string $time, \DateTimeZone|string|null $zone, string $grain, ?string $entitiesJson): string
    {
        $k = self::lockPrefix($function, $tenant, $time, $zone, $grain);
        $trimmed = $entitiesJson === null ? '' : trim($entitiesJson, " \t\n\r");
        return $trimmed === '' || $trimmed === 'null' ? $k : $k . ':' . self::entityHashJson($entitiesJson);
    }

    /**
     * Seed 004's computeEntityHash, Go's key.EntityHash: the first 12 hex of
     * the SHA-256 of the canonical JSON of the entities' [name, value] pairs
     * sorted by name.
     */
    public static function entityHash(mixed $entities): string
    {
        return substr(hash('sha256', self::pairs(Canonical::encode($entities))), 0, 12);
    }

    /** entityHashJson is entityHash of JSON text. */
    public static function entityHashJson(string $json): string
    {
        return substr(hash('sha256', self::entityCanonicalJson($json)), 0, 12);
    }

    /** The text entityHash hashes (Go's key.EntityCanonical), of JSON text. */
    public static function entityCanonicalJson(string $json): string
    {
        return self::pairs(Canonical::fromJson($json));
    }

    /**
     * pairs rewrites a canonical object {"a":1,"b":2} as the canonical
     * [["a",1],["b",2]]: its members are already sorted by name, and are
     * split at the top-level commas (decoding would make names such as "10"
     * integers and {} an empty list).
     */
    private static function pairs(string $canon): string
    {
        if ($canon === '' || $canon[0] !== '{') {
            throw new \InvalidArgumentException('entities must be a JSON object');
        }
        $pairs = [];
        $depth = 0;
        $inString = false;
        $start = 1;
        $n = strlen($canon);
        for ($i = 1; $i < $n; $i++) {
            $c = $canon[$i];
            if ($inString) {
                if ($c === '\\') {
                    $i++;
                } elseif ($c === '"') {
                    $inString = false;
                }
                continue;
            }
            if ($c === '"') {
                $inString = true;
            } elseif ($c === '{' || $c === '[') {
                $depth++;
            } elseif (($c === '}' || $c === ']') && $depth > 0) {
                $depth--;
            } elseif (($c === ',' && $depth === 0) || $i === $n - 1) {
                if ($i > $start) {
                    $pairs[] = self::pair(substr($canon, $start, $i - $start));
                }
                $start = $i + 1;
            }
        }
        return Canonical::fromJson('[' . implode(',', $pairs) . ']');
    }

    /** pair rewrites one canonical member "name":value as ["name",value]. */
    private static function pair(string $member): string
    {
        $j = 1;
        while ($member[$j] !== '"') {
            $j += $member[$j] === '\\' ? 2 : 1;
        }
        return '[' . substr($member, 0, $j + 1) . ',' . substr($member, $j + 2) . ']';
    }

    /** lockPrefix is {function}:{tenant}:{grain date}, the parts checked. */
    private static function lockPrefix(string $function, string $tenant, \DateTimeInterface|string $time, \DateTimeZone|string|null $zone, string $grain): string
    {
        self::checkPart('function', $function, ':');
        self::checkPart('tenant', $tenant, ':');
        $layout = match ($grain) {
            'minute' => 'Y-m-d\\TH:i',
            'hour' => 'Y-m-d\\TH',
            'day' => 'Y-m-d',
            default => throw new \InvalidArgumentException("grain \"$grain\": want minute, hour or day"),
        };
        // A string must name its offset: PHP would read it in its default
        // zone, JavaScript in the host's or in UTC.
        if (is_string($time) && !preg_match('/(Z|[+-]\d{2}:?\d{2})$/i', $time)) {
            throw new \InvalidArgumentException("time \"$time\": want an offset (Z or +hh:mm)");
        }
        try {
            $tz = $zone instanceof \DateTimeZone ? $zone : new \DateTimeZone($zone === null || $zone === '' ? 'UTC' : $zone);
            $t = is_string($time) ? new \DateTimeImmutable($time) : \DateTimeImmutable::createFromInterface($time);
        } catch (\Exception $e) {
            throw new \InvalidArgumentException('lock key: ' . $e->getMessage(), 0, $e);
        }
        return $function . ':' . $tenant . ':' . $t->setTimezone($tz)->format($layout);
    }

    private static function checkPart(string $name, string $s, string $forbidden): void
    {
        if ($s === '') {
            throw new \InvalidArgumentException("$name is empty");
        }
        if (!preg_match('//u', $s)) {
            throw new \InvalidArgumentException("$name is not valid UTF-8");
        }
        if (preg_match('/[\x00-\x1f\x7f]|\xc2[\x80-\x9f]/', $s)) {
            throw new \InvalidArgumentException("$name contains a control character");
        }
        if ($forbidden !== '' && strpbrk($s, $forbidden) !== false) {
            throw new \InvalidArgumentException("$name must not contain \"$forbidden\"");
        }
    }
}
