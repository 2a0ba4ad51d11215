<?php

declare(strict_types=1);

namespace Idem;

/** A problem answered by the server (status ≥ 400), or a transport error (status 0). */
class IdemException extends \RuntimeException
{
    /** @param array<string,mixed>|null $problem the RFC 9457 problem */
    public function __construct(public readonly int $status, public readonly ?array $problem, string $message)
    {
        parent::__construct($message, $status);
    }

    /** The problem type without its path, such as "lease-lost". */
    public function type(): string
    {
        $t = (string) ($this->problem['type'] ?? '');
        $p = strrpos($t, '/');
        return $p === false ? $t : substr($t, $p + 1);
    }
}
