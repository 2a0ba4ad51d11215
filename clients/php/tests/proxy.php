<?php

declare(strict_types=1);

// The router of a `php -S` proxy in front of a real idem serve that injects
// faults (see FaultProxy in lib.php). $dir/plan.json lists what to do with
// the n-th request: "pass" (forward), "lost" (forward, then answer 502 as
// if the reply were lost on the way), "cut" (forward, then send the
// status, the headers and half the body: the connection ends inside it),
// or [status, Retry-After, problem type] (answer it here). Requests past the plan pass. Each request is
// logged to $dir/seen as "METHOD PATH KEY".

$dir = (string) getenv('IDEM_PROXY_DIR');
$upstream = (string) getenv('IDEM_PROXY_UPSTREAM');
$key = $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? '-';
$log = fopen("$dir/seen", 'a');
flock($log, LOCK_EX);
$n = count(file("$dir/seen", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: []);
fwrite($log, "{$_SERVER['REQUEST_METHOD']} {$_SERVER['REQUEST_URI']} $key\n");
flock($log, LOCK_UN);
fclose($log);
$plan = json_decode((string) file_get_contents("$dir/plan.json"), true);
$what = $plan[$n] ?? 'pass';

if (is_array($what)) {
    [$status, $retryAfter, $type] = $what;
    http_response_code($status);
    header('Content-Type: application/problem+json');
    if ($retryAfter !== null) {
        header("Retry-After: $retryAfter");
    }
    echo json_encode(['type' => $type, 'title' => 'Injected', 'status' => $status, 'detail' => 'injected by the test proxy']);
    return true;
}

$headers = [];
foreach (getallheaders() as $k => $v) {
    if (!in_array(strtolower($k), ['host', 'content-length', 'connection'], true)) {
        $headers[] = "$k: $v";
    }
}
$ch = curl_init($upstream . $_SERVER['REQUEST_URI']);
$body = (string) file_get_contents('php://input');
curl_setopt_array($ch, [
    CURLOPT_CUSTOMREQUEST => $_SERVER['REQUEST_METHOD'],
    CURLOPT_RETURNTRANSFER => true,
    CURLOPT_HTTPHEADER => $headers,
    CURLOPT_PATH_AS_IS => true,
    CURLOPT_HEADERFUNCTION => static function ($ch, string $line): int {
        if (preg_match('/^(retry-after|idempotent-replayed|content-type):/i', $line)) {
            header(trim($line));
        }
        return strlen($line);
    },
] + ($body !== '' ? [CURLOPT_POSTFIELDS => $body] : []));
$out = (string) curl_exec($ch);
$status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
if ($what === 'lost') {
    http_response_code(502);
    header('Content-Type: text/plain', true);
    echo 'the reply was lost';
    return true;
}
http_response_code($status);
if ($what === 'cut') {
    header('Content-Length: ' . strlen($out));
    echo substr($out, 0, intdiv(strlen($out), 2));
    exit;
}
echo $out;
return true;
