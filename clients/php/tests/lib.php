<?php

declare(strict_types=1);

// A tiny test runner: test() registers, run() prints "N passed, M failed"
// and exits non-zero on a failure.

require __DIR__ . '/../autoload.php';

final class AssertionFailed extends Exception
{
}

/** @var list<array{string, callable}> */
$GLOBALS['__tests'] = [];

function test(string $name, callable $fn): void
{
    $GLOBALS['__tests'][] = [$name, $fn];
}

function check(bool $cond, string $msg = 'assertion failed'): void
{
    if (!$cond) {
        throw new AssertionFailed($msg);
    }
}

function same(mixed $want, mixed $got, string $msg = ''): void
{
    if ($want !== $got) {
        throw new AssertionFailed(($msg ? "$msg: " : '') . 'want ' . var_export($want, true) . ', got ' . var_export($got, true));
    }
}

/** throws runs $fn and returns what it threw (of $class), failing if nothing. */
function throws(string $class, callable $fn): Throwable
{
    try {
        $fn();
    } catch (Throwable $e) {
        if ($e instanceof $class) {
            return $e;
        }
        throw new AssertionFailed("want $class, got " . get_class($e) . ': ' . $e->getMessage());
    }
    throw new AssertionFailed("want $class, nothing was thrown");
}

/** Runs the tests and returns the exit code (the caller exits, after its cleanup). */
function run_tests(): int
{
    $pass = $fail = 0;
    // --filter=TEXT runs only the tests whose name contains TEXT.
    $filter = null;
    foreach (array_slice($GLOBALS['argv'] ?? [], 1) as $arg) {
        if (str_starts_with($arg, '--filter=')) {
            $filter = substr($arg, strlen('--filter='));
        }
    }
    foreach ($GLOBALS['__tests'] as [$name, $fn]) {
        if ($filter !== null && !str_contains($name, $filter)) {
            continue;
        }
        try {
            $fn();
            $pass++;
            echo "ok   $name\n";
        } catch (Throwable $e) {
            $fail++;
            echo "FAIL $name\n     " . get_class($e) . ': ' . $e->getMessage() . "\n     at " . $e->getFile() . ':' . $e->getLine() . "\n";
        }
    }
    echo "$pass passed, $fail failed\n";
    return $fail === 0 && $pass > 0 ? 0 : 1;
}

/** A real `idem serve` on a temp SQLite file and a free port. */
final class TestServer
{
    public string $url;
    public string $adminKey;
    /** @var resource */
    private $proc;
    private string $dir;

    /** @param array<string,string> $env variables added to the server's environment (IDEM_HEALTH_DEAD_JOBS, …) */
    public function __construct(array $env = [])
    {
        $bin = getenv('IDEM_BIN') ?: self::build();
        $this->dir = sys_get_temp_dir() . '/idem-php-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
        $cmd = [$bin, 'serve', '--database', $this->dir . '/idem.db', '--listen', '127.0.0.1:0', '--log-level', 'warn'];
        $this->proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['file', $this->dir . '/stderr', 'w']], $pipes, null, $env + getenv());
        if (!is_resource($this->proc)) {
            throw new RuntimeException('cannot start idem serve');
        }
        $out = '';
        $deadline = microtime(true) + 30;
        stream_set_blocking($pipes[1], false);
        while (microtime(true) < $deadline) {
            $out .= (string) fgets($pipes[1]);
            if (preg_match('/IDEM_API_KEY=(\S+)/', $out, $k) && preg_match('#api listening on (http://\S+)#', $out, $u)) {
                $this->adminKey = $k[1];
                $this->url = $u[1];
                return;
            }
            if (!proc_get_status($this->proc)['running']) {
                break;
            }
            usleep(20_000);
        }
        throw new RuntimeException("idem serve did not start: $out " . @file_get_contents($this->dir . '/stderr'));
    }

    /**
     * createKey makes an API key in the server's database (`idem apikey
     * create`).
     *
     * @return array{id: string, key: string}
     */
    public function createKey(string $tenant, bool $admin = false): array
    {
        $cmd = [getenv('IDEM_BIN') ?: self::build(), 'apikey', 'create', '--database', $this->dir . '/idem.db', '--tenant', $tenant, '--json'];
        if ($admin) {
            $cmd[] = '--admin';
        }
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        if (proc_close($p) !== 0) {
            throw new RuntimeException("idem apikey create: $out $err");
        }
        $k = json_decode($out, true, 512, JSON_THROW_ON_ERROR);
        return ['id' => $k['id'], 'key' => $k['key']];
    }

    private static function build(): string
    {
        static $bin = null;
        if ($bin === null) {
            $bin = sys_get_temp_dir() . '/idem-php-bin-' . getmypid();
            $root = dirname(__DIR__, 3);
            exec('cd ' . escapeshellarg($root) . ' && go build -o ' . escapeshellarg($bin) . ' ./cmd/idem 2>&1', $o, $rc);
            if ($rc !== 0) {
                throw new RuntimeException("go build: " . implode("\n", $o));
            }
            register_shutdown_function(static fn () => @unlink($bin));
        }
        return $bin;
    }

    public function stop(): void
    {
        proc_terminate($this->proc, SIGTERM);
        proc_close($this->proc);
        exec('rm -rf ' . escapeshellarg($this->dir));
    }
}

/**
 * A `php -S` proxy (tests/proxy.php) in front of $upstream that follows a
 * plan of faults, one entry per request: "pass", "lost" (forwarded, then a
 * 502), or [status, Retry-After, problem type] (answered by the proxy).
 */
final class FaultProxy
{
    public string $url;
    /** @var resource */
    private $proc;
    private string $dir;

    /** @param list<string|array{int, ?string, string}> $plan */
    public function __construct(string $upstream, array $plan)
    {
        $this->dir = sys_get_temp_dir() . '/idem-php-proxy-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
        file_put_contents($this->dir . '/plan.json', json_encode($plan));
        touch($this->dir . '/seen');
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $addr = stream_socket_get_name($probe, false);
        fclose($probe);
        $env = ['IDEM_PROXY_DIR' => $this->dir, 'IDEM_PROXY_UPSTREAM' => $upstream] + getenv();
        $this->proc = proc_open([PHP_BINARY, '-S', $addr, __DIR__ . '/proxy.php'], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, null, $env);
        $this->url = 'http://' . $addr;
        $deadline = microtime(true) + 10;
        while (microtime(true) < $deadline) {
            $s = @stream_socket_client('tcp://' . $addr, $errno, $errstr, 0.2);
            if ($s !== false) {
                fclose($s);
                return;
            }
            usleep(20_000);
        }
        throw new RuntimeException('the test proxy did not start');
    }

    /** @return list<array{string, string, string}> method, path and Idempotency-Key of each request */
    public function seen(): array
    {
        $lines = file($this->dir . '/seen', FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [];
        return array_map(static fn (string $l) => explode(' ', $l, 3), $lines);
    }

    public function stop(): void
    {
        proc_terminate($this->proc, SIGTERM);
        proc_close($this->proc);
        exec('rm -rf ' . escapeshellarg($this->dir));
    }
}
