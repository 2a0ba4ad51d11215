<?php

declare(strict_types=1);

namespace Idem;

/** Throw PermanentError from a handler to fail the job without retries. */
class PermanentError extends \RuntimeException
{
}
