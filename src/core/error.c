/* error.c: result codes, their texts, and the erg_error helper. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

const char *erg_strerror(erg_status status)
{
    switch (status) {
#define ERG_X_TEXT(name, num, text)                                                                \
    case ERG_##name:                                                                               \
        return text;
        ERG_STATUS_MAP(ERG_X_TEXT)
#undef ERG_X_TEXT
    }
    return "unknown error";
}

const char *erg_status_name(erg_status status)
{
    switch (status) {
#define ERG_X_NAME(name, num, text)                                                                \
    case ERG_##name:                                                                               \
        return #name;
        ERG_STATUS_MAP(ERG_X_NAME)
#undef ERG_X_NAME
    }
    return "UNKNOWN";
}

erg_status erg_error_setv(erg_error *err, erg_status status, const char *fmt, va_list ap)
{
    if (err) {
        err->status = status;
        if (fmt)
            vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        else
            snprintf(err->msg, sizeof(err->msg), "%s", erg_strerror(status));
    }
    return status;
}

erg_status erg_error_set(erg_error *err, erg_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    erg_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

void erg_error_clear(erg_error *err)
{
    if (err) {
        err->status = ERG_OK;
        err->msg[0] = '\0';
    }
}

size_t erg_error_size(void)
{
    return sizeof(erg_error);
}

erg_status erg_error_status(const erg_error *err)
{
    return err ? err->status : ERG_OK;
}

const char *erg_error_message(const erg_error *err)
{
    /* a message is NUL-terminated within the array; never read past it */
    return err && memchr(err->msg, '\0', sizeof err->msg) ? err->msg : "";
}

const char *erg_version(void)
{
    return ERG_VERSION_STRING;
}

void erg_free(void *ptr)
{
    erg__free(ptr);
}
