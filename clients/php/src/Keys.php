<?php

declare(strict_types=1);

namespace Idem;

/** Idempotency keys computed as idem's Go package key does. */
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
