<?php

declare(strict_types=1);

// The worker and signals, with a real process (sigterm_worker.php) and a
// real server. Required by run.php, whose $server and $srv it uses.

/**
 * read_until reads lines of $pipe until one contains $want, for at most
 * $seconds; it returns what it read.
 *
 * @param resource $pipe
 */
function read_until($pipe, string $want, float $seconds): string
{
    $out = '';
    $deadline = microtime(true) + $seconds;
    stream_set_blocking($pipe, false);
    while (!str_contains($out, $want) && ($left = $deadline - microtime(true)) > 0) {
        $r = [$pipe];
        $w = $e = null;
        if (@stream_select($r, $w, $e, 0, (int) min($left * 1e6, 200_000)) > 0) {
            $chunk = fread($pipe, 8192);
            if ($chunk === '' || $chunk === false) {
                if (feof($pipe)) {
                    break;
                }
                continue;
            }
            $out .= $chunk;
        }
    }
    return $out;
}

// A SIGTERM during the long poll of a claim ends it promptly: the worker
// returns well before the poll's 30s wait (curl is interrupted, not waited
// out), without an error, having run nothing.
test('SIGTERM during a long poll ends the worker promptly', function () use ($server, &$srv) {
    $server();
    // Through a proxy that logs each request as it arrives: once it has
    // logged the claim, the worker is waiting inside curl for the reply.
    $proxy = new FaultProxy($srv->url, []);
    $p = proc_open([PHP_BINARY, __DIR__ . '/sigterm_worker.php', $proxy->url, $srv->adminKey, 'php-sigterm'],
        [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    stream_set_blocking($pipes[2], false); // read on a failure only: never wait for the worker's end
    try {
        $deadline = microtime(true) + 30;
        while (!in_array('POST /v1/claim', array_map(static fn (array $s) => $s[0] . ' ' . $s[1], $proxy->seen()), true) && microtime(true) < $deadline) {
            usleep(20_000);
        }
        if (microtime(true) >= $deadline) {
            throw new AssertionFailed('the worker did not claim: ' . stream_get_contents($pipes[2]));
        }
        $out = '';
        $t0 = microtime(true);
        proc_terminate($p, SIGTERM);
        // Generous, and far below the 30s wait the old worker sat out.
        $out .= read_until($pipes[1], 'stopped', 12.0);
        $took = microtime(true) - $t0;
        if (!str_contains($out, 'stopped ran=0')) {
            throw new AssertionFailed(sprintf('no graceful stop %.1fs after SIGTERM: %s %s', $took, $out, stream_get_contents($pipes[2])));
        }
        same('', (string) stream_get_contents($pipes[2]), 'stderr');
    } finally {
        proc_terminate($p, SIGKILL);
        proc_close($p);
        $proxy->stop();
    }
});
