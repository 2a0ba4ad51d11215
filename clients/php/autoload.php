<?php

// Without composer: require this file. With composer, "autoload" in
// composer.json maps the Idem\ namespace to src/.
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Idem\\')) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 5)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
