/*
 * worker-host guest shim: the narrow ABI between the Python host and the
 * QuickJS-NG runtime compiled to wasm32-wasi (reactor).
 *
 * Everything crosses the boundary as UTF-8 JSON strings in guest memory:
 *   wh_alloc / wh_free         host-managed buffers for inputs
 *   wh_init(prelude, stack)    create the runtime and context, run the prelude
 *   wh_set_max_stack(bytes)    the JS stack limit (isolates start from a
 *                              memory snapshot taken after wh_init)
 *   wh_load(bundle)            compile and evaluate the bundle as an ES module
 *   wh_call(request)           hand one request to the prelude's dispatcher,
 *                              drain the job queue, then poll the prelude
 *   wh_result_ptr / _len       the last answer (JSON), owned by the guest
 *
 * Every entry point returns a status (WH_OK, WH_ERROR, WH_OOM). The prelude
 * does the real work; this file only moves strings and runs jobs, so that the
 * part compiled to Wasm stays small and the logic stays in one language.
 */
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

#include "quickjs.h"

#define WH_OK 0
#define WH_ERROR 1
#define WH_OOM 2

static JSRuntime *runtime;
static JSContext *context;
static char *result;
static size_t result_length;
/* Set when an allocation fails: the store's memory limit was reached. */
static int out_of_memory;

static void *counting_calloc(void *opaque, size_t count, size_t size) {
    (void)opaque;
    void *p = calloc(count, size);
    if (p == NULL && count != 0 && size != 0) out_of_memory = 1;
    return p;
}

static void *counting_malloc(void *opaque, size_t size) {
    (void)opaque;
    void *p = malloc(size);
    if (p == NULL && size != 0) out_of_memory = 1;
    return p;
}

static void counting_free(void *opaque, void *ptr) {
    (void)opaque;
    free(ptr);
}

static void *counting_realloc(void *opaque, void *ptr, size_t size) {
    (void)opaque;
    void *p = realloc(ptr, size);
    if (p == NULL && size != 0) out_of_memory = 1;
    return p;
}

static size_t usable_size(const void *ptr) {
    return malloc_usable_size((void *)ptr);
}

static const JSMallocFunctions allocator = {
    counting_calloc, counting_malloc, counting_free, counting_realloc, usable_size,
};

/* One extra byte is always zero: QuickJS requires NUL-terminated sources. */
__attribute__((export_name("wh_alloc"))) char *wh_alloc(size_t size) {
    char *buffer = malloc(size + 1);
    if (buffer != NULL) buffer[size] = '\0';
    return buffer;
}

__attribute__((export_name("wh_free"))) void wh_free(void *ptr) { free(ptr); }

__attribute__((export_name("wh_result_ptr"))) const char *wh_result_ptr(void) { return result; }

__attribute__((export_name("wh_result_len"))) size_t wh_result_len(void) { return result_length; }

/* Every entry point starts with no answer, so a failure never returns a stale one. */
static void clear_result(void) {
    free(result);
    result = NULL;
    result_length = 0;
}

static void set_result(const char *text, size_t length) {
    clear_result();
    char *copy = malloc(length + 1);
    if (copy == NULL) {
        out_of_memory = 1;
        return;
    }
    memcpy(copy, text, length);
    copy[length] = '\0';
    result = copy;
    result_length = length;
}

static void set_result_cstr(const char *text) { set_result(text, strlen(text)); }


/* Describes the pending exception as the result; the host logs it only. */
static int fail_with_exception(void) {
    JSValue exception = JS_GetException(context);
    const char *text = JS_ToCString(context, exception);
    if (text != NULL) {
        set_result_cstr(text);
        JS_FreeCString(context, text);
    } else {
        set_result_cstr("exception could not be described");
    }
    JS_FreeValue(context, exception);
    return out_of_memory ? WH_OOM : WH_ERROR;
}

/* Runs queued promise jobs until none are left. */
static int drain_jobs(void) {
    for (;;) {
        JSContext *job_context;
        int ran = JS_ExecutePendingJob(runtime, &job_context);
        if (ran == 0) return WH_OK;
        if (ran < 0) return fail_with_exception();
        if (out_of_memory) return WH_OOM;
    }
}

/* Calls globalThis[name](argument?) and stores its string answer as the result. */
static int call_global(const char *name, const char *argument, size_t argument_length) {
    JSValue global = JS_GetGlobalObject(context);
    JSValue function = JS_GetPropertyStr(context, global, name);
    JSValue arg = JS_UNDEFINED;
    int argc = 0;
    if (argument != NULL) {
        arg = JS_NewStringLen(context, argument, argument_length);
        argc = 1;
    }
    JSValue answer = JS_Call(context, function, global, argc, &arg);
    JS_FreeValue(context, arg);
    JS_FreeValue(context, function);
    JS_FreeValue(context, global);
    if (JS_IsException(answer)) return fail_with_exception();
    int status = WH_OK;
    if (JS_IsString(answer)) {
        size_t length;
        const char *text = JS_ToCStringLen(context, &length, answer);
        if (text == NULL) {
            status = fail_with_exception();
        } else {
            set_result(text, length);
            JS_FreeCString(context, text);
        }
    }
    JS_FreeValue(context, answer);
    if (out_of_memory) return WH_OOM;
    return status;
}

__attribute__((export_name("wh_init"))) int wh_init(const char *prelude, size_t prelude_length,
                                                      size_t max_stack_bytes) {
    clear_result();
    runtime = JS_NewRuntime2(&allocator, NULL);
    if (runtime == NULL) return WH_OOM;
    JS_SetMaxStackSize(runtime, max_stack_bytes);
    context = JS_NewContext(runtime);
    if (context == NULL) return WH_OOM;
    JSValue value = JS_Eval(context, prelude, prelude_length, "prelude.js", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(value)) return fail_with_exception();
    JS_FreeValue(context, value);
    set_result_cstr(JS_GetVersion());
    return out_of_memory ? WH_OOM : WH_OK;
}

__attribute__((export_name("wh_set_max_stack"))) void wh_set_max_stack(size_t max_stack_bytes) {
    JS_SetMaxStackSize(runtime, max_stack_bytes);
}

/*
 * Compiles the bundle as an ES module and starts its evaluation. The module
 * namespace and the evaluation promise go to the prelude through
 * __wh_bundle_loaded(namespace, promise); setup awaits the promise, so
 * top-level await works. Imports cannot resolve: no module loader is set, so
 * a bundle that is not self-contained fails here.
 */
__attribute__((export_name("wh_load"))) int wh_load(const char *source, size_t source_length) {
    clear_result();
    JSValue module = JS_Eval(context, source, source_length, "bundle.mjs",
                             JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(module)) return fail_with_exception();
    JSModuleDef *definition = JS_VALUE_GET_PTR(module);
    JSValue evaluation = JS_EvalFunction(context, module);
    if (JS_IsException(evaluation)) return fail_with_exception();
    JSValue namespace = JS_GetModuleNamespace(context, definition);
    if (JS_IsException(namespace)) {
        JS_FreeValue(context, evaluation);
        return fail_with_exception();
    }
    JSValue global = JS_GetGlobalObject(context);
    JSValue loaded = JS_GetPropertyStr(context, global, "__wh_bundle_loaded");
    JSValue args[2] = {namespace, evaluation};
    JSValue answer = JS_Call(context, loaded, global, 2, args);
    JS_FreeValue(context, namespace);
    JS_FreeValue(context, evaluation);
    JS_FreeValue(context, loaded);
    JS_FreeValue(context, global);
    if (JS_IsException(answer)) return fail_with_exception();
    JS_FreeValue(context, answer);
    int status = drain_jobs();
    if (status != WH_OK) return status;
    return call_global("__wh_poll", NULL, 0);
}

__attribute__((export_name("wh_call"))) int wh_call(const char *request, size_t request_length) {
    clear_result();
    int status = call_global("__wh_dispatch", request, request_length);
    if (status != WH_OK) return status;
    status = drain_jobs();
    if (status != WH_OK) return status;
    return call_global("__wh_poll", NULL, 0);
}
