<?php

declare(strict_types=1);

namespace Idem;

/** What a handler gets besides the job: the lease, to extend in long work. */
final class JobContext
{
    /** @param array<string,mixed> $job the claimed job */
    public function __construct(private Client $client, public readonly array $job, private string $lease)
    {
    }

    /** heartbeat extends the lease; call it in work that may outlast the lease. */
    public function heartbeat(): string
    {
        return $this->client->heartbeat($this->job, $this->lease);
    }
}
