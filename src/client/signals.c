/* signals.c: the client's SIGINT/SIGTERM/SIGHUP handling: the process-wide registry of clients
 * that take part, the handler, and passing the signal on once every GPU is reset. */
#include "client/client_struct.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/*
 * SIGNALS
 *
 * The handler (installed with the first client that does not say
 * ERG_CLIENT_NO_SIGNALS, removed with the last) only notes the signal: the
 * episode counter goes up, with the signal's number and the thread it
 * interrupted. Each registered client's clock thread sees the new episode
 * within 100 us, resets its GPU's clocks, writes its logs, tells its own
 * watchdog that its GPU is clean, makes its producer forget the last clock it
 * asked for (reset_gen), and marks the episode handled. The thread that finds
 * every registered client done passes the signal on, as if ergon had not been
 * there:
 *  - to the handler that was installed before the first client (Python's
 *    KeyboardInterrupt handler, a framework's SIGTERM handler): the signal is
 *    sent again to the thread it first interrupted, and our handler calls that
 *    handler there (so that thread's blocking call is interrupted, as it would
 *    have been without us);
 *  - if there was none, with the default action: our handler is removed and the
 *    signal re-raised; the process dies of it (its exit status says so).
 * A program that survives (its handler returned, e.g. Python caught
 * KeyboardInterrupt) goes on normally: the episode is over, a client created
 * later does not see it, a clock asked for again is applied again, and the
 * next signal is a new episode. A signal ignored (SIG_IGN) when the first
 * client comes, e.g. SIGHUP under nohup, is left ignored. A forked child
 * (DataLoader worker) has no clock threads: there the handler passes the
 * signal straight on. A client with ERG_CLIENT_NO_SIGNALS takes no part and is
 * told nothing: its watchdog resets its GPU when the process dies.
 */

#define NSIGS 3
#define MAX_CLIENTS 256

static const int handled_signals[NSIGS] = {SIGINT, SIGTERM, SIGHUP};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static erg_client *registry[MAX_CLIENTS]; /* clients taking part (reg_mu) */
static int nregistered;                   /* (reg_mu) */
static bool installed[NSIGS];             /* our handler is installed for signal i (reg_mu) */
static unsigned long settled;             /* episodes up to this one are passed on (reg_mu) */
/* Read by the handler; written only while our handler is not installed. */
static struct sigaction old_actions[NSIGS];
static pid_t installer_pid;

/* Written by the handler (lock-free atomics are async-signal-safe). */
static _Atomic unsigned long episode;
static _Atomic int episode_sig;
static _Atomic pid_t episode_tid;
static _Atomic int forward[NSIGS]; /* deliveries of signal i to hand to the old handler */

_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "the signal handler needs lock-free atomics");

static int sig_index(int sig)
{
    for (int i = 0; i < NSIGS; i++)
        if (handled_signals[i] == sig)
            return i;
    return -1;
}

static bool has_handler(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) || (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
}

/* Deliver sig to the calling thread now (unblocked for the moment). */
static void raise_here(int sig)
{
    sigset_t set, prev;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, &prev);
    pthread_kill(pthread_self(), sig); /* to the calling thread: delivered before it returns */
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
}

static void call_old(int i, int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *old = &old_actions[i];
    int saved = errno;
    if (old->sa_flags & SA_SIGINFO)
        old->sa_sigaction(sig, si, uc);
    else if (has_handler(old))
        old->sa_handler(sig);
    errno = saved;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int i = sig_index(sig);
    if (i < 0)
        return;
    if (getpid() != installer_pid) {
        /* A forked child (no clock threads, its clients are copies): as if we were not here. */
        if (has_handler(&old_actions[i])) {
            call_old(i, sig, si, uc);
        } else {
            sigaction(sig, &old_actions[i], NULL);
            raise(sig);
        }
        return;
    }
    int n = atomic_load(&forward[i]);
    while (n > 0 && !atomic_compare_exchange_weak(&forward[i], &n, n - 1))
        ;
    if (n > 0) {
        call_old(i, sig, si, uc); /* a signal we pass on (pass_on) */
        return;
    }
    atomic_store(&episode_sig, sig);
    atomic_store(&episode_tid, gettid());
    atomic_fetch_add(&episode, 1);
}

static void our_action(struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = on_signal;
    sa->sa_flags = SA_SIGINFO;
    sigemptyset(&sa->sa_mask);
}

/* With reg_mu held, as the first client registers. */
static void install_handlers(void)
{
    struct sigaction sa;
    our_action(&sa);
    installer_pid = getpid();
    settled = atomic_load(&episode);
    for (int i = 0; i < NSIGS; i++) {
        struct sigaction cur;
        installed[i] = false;
        if (sigaction(handled_signals[i], NULL, &cur) != 0)
            continue;
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
            continue; /* ignored (nohup): stays ignored */
        old_actions[i] = cur;
        atomic_store(&forward[i], 0);
        if (sigaction(handled_signals[i], &sa, NULL) == 0)
            installed[i] = true;
    }
}

/* With reg_mu held, as the last client leaves. */
static void uninstall_handlers(void)
{
    for (int i = 0; i < NSIGS; i++)
        if (installed[i]) {
            sigaction(handled_signals[i], &old_actions[i], NULL);
            installed[i] = false;
        }
}

/* Every registered client has restored its GPU for episode `e` of signal i: deliver the
 * signal as the process would have received it without us. */
static void pass_on(int i, pid_t tid)
{
    int sig = handled_signals[i];
    if (has_handler(&old_actions[i])) {
        atomic_fetch_add(&forward[i], 1);
        if (tid <= 0 || tgkill(getpid(), tid, sig) != 0)
            raise_here(sig); /* that thread is gone: here, our handler forwards it */
        return;
    }
    /* The default action: the process dies of the signal. */
    pthread_mutex_lock(&reg_mu);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    pthread_mutex_unlock(&reg_mu);
    raise_here(sig);
    /* Still alive (blocked elsewhere? not for these signals): our handler back. */
    pthread_mutex_lock(&reg_mu);
    if (installed[i]) {
        struct sigaction sa;
        our_action(&sa);
        sigaction(sig, &sa, NULL);
    }
    pthread_mutex_unlock(&reg_mu);
}

/* Pass the current episode on if every registered client has handled it. */
static void settle(void)
{
    pthread_mutex_lock(&reg_mu);
    unsigned long e = atomic_load(&episode);
    if (e == settled) {
        pthread_mutex_unlock(&reg_mu);
        return;
    }
    for (int k = 0; k < MAX_CLIENTS; k++)
        if (registry[k] && atomic_load(&registry[k]->sig_handled) != e) {
            pthread_mutex_unlock(&reg_mu);
            return;
        }
    settled = e;
    int i = sig_index(atomic_load(&episode_sig));
    pid_t tid = atomic_load(&episode_tid);
    bool inst = i >= 0 && installed[i];
    pthread_mutex_unlock(&reg_mu);
    if (inst)
        pass_on(i, tid);
}

erg_status erg__client_signals_register(erg_client *c, erg_error *err)
{
    c->sig_registered = false;
    if (c->flags & ERG_CLIENT_NO_SIGNALS)
        return ERG_OK;
    pthread_mutex_lock(&reg_mu);
    int slot = -1;
    for (int k = 0; k < MAX_CLIENTS && slot < 0; k++)
        if (!registry[k])
            slot = k;
    if (slot < 0) {
        pthread_mutex_unlock(&reg_mu);
        return erg_error_set(err, ERG_ENOTSUP,
                             "more than %d clients handle signals in this process: create the "
                             "others with ERG_CLIENT_NO_SIGNALS (their watchdog still resets "
                             "their GPU when the process dies)",
                             MAX_CLIENTS);
    }
    if (nregistered++ == 0)
        install_handlers();
    /* A signal that came before this client is not this client's. */
    atomic_store(&c->sig_handled, atomic_load(&episode));
    registry[slot] = c;
    c->sig_registered = true;
    pthread_mutex_unlock(&reg_mu);
    return ERG_OK;
}

void erg__client_signals_unregister(erg_client *c)
{
    if (!c->sig_registered)
        return;
    pthread_mutex_lock(&reg_mu);
    for (int k = 0; k < MAX_CLIENTS; k++)
        if (registry[k] == c)
            registry[k] = NULL;
    c->sig_registered = false;
    if (--nregistered > 0) {
        pthread_mutex_unlock(&reg_mu);
        settle(); /* the others may all be done: this one no longer counts */
        return;
    }
    unsigned long e = atomic_load(&episode);
    /* (In a forked child the episode and its thread are the parent's: not ours to deliver.) */
    bool pending = e != settled && getpid() == installer_pid;
    settled = e;
    int i = sig_index(atomic_load(&episode_sig));
    pid_t tid = atomic_load(&episode_tid);
    bool was_installed = i >= 0 && installed[i];
    uninstall_handlers();
    pthread_mutex_unlock(&reg_mu);
    /* A signal no clock thread passed on (they had stopped): the process's own handling,
     * now back in place, gets it. */
    if (pending && was_installed && (tid <= 0 || tgkill(getpid(), tid, handled_signals[i]) != 0))
        raise_here(handled_signals[i]);
}

void erg__client_signals_poll(erg_client *c)
{
    if (!c->sig_registered)
        return;
    unsigned long e = atomic_load(&episode);
    if (e == atomic_load(&c->sig_handled))
        return;
    erg_error err;
    bool clean = erg_gpu_reset_sm_clocks(c->gpu, c->dev, &err) == ERG_OK;
    if (c->mem_locked && erg_gpu_reset_mem_clocks(c->gpu, c->dev, &err) != ERG_OK)
        clean = false;
    atomic_store(&c->active_clock, 0);
    /* The producer's last request is no longer the GPU's clock: asked again, it is applied. */
    atomic_fetch_add_explicit(&c->reset_gen, 1, memory_order_release);
    if (clean)
        erg__watchdog_note(c, false);
    if (c->log_dir)
        erg_client_flush_logs(c, &err);
    atomic_store(&c->sig_handled, e);
    settle();
}
