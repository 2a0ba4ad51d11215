<?php

declare(strict_types=1);

namespace Idem;

/**
 * The IdemException of a 409 /problems/conflict (the Go client's
 * idemtype.ErrConflict): a concurrent change kept the operation from
 * completing and nothing was done. The client retries it with the same
 * Idempotency-Key (the server keeps no answer under the key); it is thrown
 * when the retries run out.
 */
class ConflictException extends IdemException
{
}
