<?php

declare(strict_types=1);

// A worker process for the SIGTERM test (signals.php): php
// sigterm_worker.php URL KEY QUEUE runs a Worker with a 30s long poll on
// QUEUE and prints "stopped ran=N" once run() has returned.

require __DIR__ . '/../autoload.php';

[, $url, $key, $queue] = $argv;

$client = new Idem\Client($url, $key);
$w = new Idem\Worker($client, [$queue], 'php-sigterm-worker', '30s', '30s');
$w->handle('k', static fn () => null);
$ran = $w->run();
fwrite(STDOUT, "stopped ran=$ran\n");
