/*
 * Email templates (see mail_templates.h). Each message is one template per language: a
 * subject and a body of paragraphs separated by blank lines, with {name} placeholders. The
 * plain-text part is the body with values substituted; the HTML part is derived from the same
 * body (paragraphs become <p>, line breaks <br>, {link} an anchor), so the two parts never
 * drift apart.
 */
#include "domain/mail_templates.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/err.h"
#include "domain/growbuf.h"

typedef struct var {
    const char *name;
    const char *value;
} var_t;

typedef struct tpl {
    const char *subject;
    const char *body;
} tpl_t;

enum mode { MODE_SUBJECT, MODE_TEXT, MODE_HTML };

static void sb_put_escaped(growbuf_t *b, const char *s, size_t n);
static void put_value(growbuf_t *b, const char *v, enum mode mode);
static const char *lookup(const var_t *vars, const char *name, size_t n);
static char *render(const char *tpl, const var_t *vars, enum mode mode);
static void render_msg(const char *lang, const tpl_t *t, const var_t *vars, mail_msg_t *out);
static bool is_es(const char *lang);
static int render_session(const char *lang, const mail_session_t *s, const tpl_t *en,
                          const tpl_t *es_tpl, mail_msg_t *out);

/* ---- Templates ------------------------------------------------------------------------- */

static const tpl_t verification_en = {
    "Verify your email address",
    "Hello,\n\n"
    "Please confirm your email address by opening this link:\n\n"
    "{link}\n\n"
    "The link is valid for 24 hours. If you did not create an account, you can ignore this "
    "message.",
};
static const tpl_t verification_es = {
    "Verifica tu dirección de correo electrónico",
    "Hola:\n\n"
    "Confirma tu dirección de correo electrónico abriendo este enlace:\n\n"
    "{link}\n\n"
    "El enlace es válido durante 24 horas. Si no creaste una cuenta, puedes ignorar este "
    "mensaje.",
};

static const tpl_t reset_en = {
    "Reset your password",
    "Hello,\n\n"
    "We received a request to reset your password. Open this link to choose a new one:\n\n"
    "{link}\n\n"
    "The link is valid for 1 hour and works only once. If you did not ask for this, you can "
    "ignore this message; your password stays the same.",
};
static const tpl_t reset_es = {
    "Restablece tu contraseña",
    "Hola:\n\n"
    "Recibimos una solicitud para restablecer tu contraseña. Abre este enlace para elegir una "
    "nueva:\n\n"
    "{link}\n\n"
    "El enlace es válido durante 1 hora y solo puede usarse una vez. Si no lo solicitaste, "
    "puedes ignorar este mensaje; tu contraseña no cambiará.",
};

static const tpl_t invite_en = {
    "You're invited to join {org}",
    "Hello,\n\n"
    "{who} to join {org} with the {role} role.\n\n"
    "Accept the invitation here:\n\n"
    "{link}\n\n"
    "If you were not expecting this invitation, you can ignore this message.",
};
static const tpl_t invite_es = {
    "Invitación para unirte a {org}",
    "Hola:\n\n"
    "{who} a unirte a {org} con el rol de {role}.\n\n"
    "Acepta la invitación aquí:\n\n"
    "{link}\n\n"
    "Si no esperabas esta invitación, puedes ignorar este mensaje.",
};

static const tpl_t scheduled_en = {
    "Session scheduled: {title}",
    "Hello,\n\n"
    "A session has been scheduled for {title}.\n\n"
    "Coach: {coach}\n"
    "Teacher: {teacher}\n"
    "Starts: {start}\n"
    "Duration: {duration} minutes\n\n"
    "You can find the details in the app.",
};
static const tpl_t scheduled_es = {
    "Sesión programada: {title}",
    "Hola:\n\n"
    "Se ha programado una sesión de {title}.\n\n"
    "Coach: {coach}\n"
    "Docente: {teacher}\n"
    "Inicio: {start}\n"
    "Duración: {duration} minutos\n\n"
    "Puedes consultar los detalles en la aplicación.",
};

static const tpl_t changed_en = {
    "Session changed: {title}",
    "Hello,\n\n"
    "A session of {title} has been moved.\n\n"
    "Coach: {coach}\n"
    "Teacher: {teacher}\n"
    "Now starts: {start}\n"
    "Duration: {duration} minutes\n\n"
    "The attached invitation updates it in your calendar.",
};
static const tpl_t changed_es = {
    "Sesión modificada: {title}",
    "Hola:\n\n"
    "Se ha cambiado una sesión de {title}.\n\n"
    "Coach: {coach}\n"
    "Docente: {teacher}\n"
    "Nuevo inicio: {start}\n"
    "Duración: {duration} minutos\n\n"
    "La invitación adjunta la actualiza en tu calendario.",
};

static const tpl_t cancelled_en = {
    "Session cancelled: {title}",
    "Hello,\n\n"
    "The session of {title} has been cancelled.\n\n"
    "Coach: {coach}\n"
    "Teacher: {teacher}\n"
    "Was scheduled for: {start}\n"
    "Duration: {duration} minutes\n\n"
    "You can find the details in the app.",
};
static const tpl_t cancelled_es = {
    "Sesión cancelada: {title}",
    "Hola:\n\n"
    "Se ha cancelado la sesión de {title}.\n\n"
    "Coach: {coach}\n"
    "Docente: {teacher}\n"
    "Estaba programada para: {start}\n"
    "Duración: {duration} minutos\n\n"
    "Puedes consultar los detalles en la aplicación.",
};

/* Account notices (mail_render_account_notice): the subject and the first paragraph of each
 * kind; account_notice_end_en / _es closes every one of them. No placeholders. */
static const struct {
    tpl_t en, es;
} account_notices[MAIL_NOTICE_COUNT] = {
    [MAIL_NOTICE_PASSWORD_CHANGED] =
        {
            {"Your password was changed",
             "Hello,\n\n"
             "The password of your account was just changed. Your other signed-in devices were "
             "signed out."},
            {"Tu contraseña se ha cambiado",
             "Hola:\n\n"
             "Se acaba de cambiar la contraseña de tu cuenta. Se cerró la sesión en tus otros "
             "dispositivos."},
        },
    [MAIL_NOTICE_PASSWORD_RESET] =
        {
            {"Your password was reset",
             "Hello,\n\n"
             "The password of your account was just reset with a password-reset link. Every "
             "other signed-in device was signed out."},
            {"Tu contraseña se ha restablecido",
             "Hola:\n\n"
             "Se acaba de restablecer la contraseña de tu cuenta con un enlace de "
             "restablecimiento. Se cerró la sesión en todos los demás dispositivos."},
        },
    [MAIL_NOTICE_TWO_FACTOR_ENABLED] =
        {
            {"Two-factor sign-in is on",
             "Hello,\n\n"
             "Two-factor sign-in was turned on for your account: signing in now also asks for a "
             "code from your authenticator app, or one of your backup codes."},
            {"El inicio de sesión en dos pasos está activado",
             "Hola:\n\n"
             "Se activó el inicio de sesión en dos pasos en tu cuenta: al iniciar sesión se pedirá "
             "también un código de tu aplicación de autenticación o uno de tus códigos de "
             "respaldo."},
        },
    [MAIL_NOTICE_TWO_FACTOR_DISABLED] =
        {
            {"Two-factor sign-in is off",
             "Hello,\n\n"
             "Two-factor sign-in was turned off for your account: signing in asks only for your "
             "password again, and every trusted device was forgotten."},
            {"El inicio de sesión en dos pasos está desactivado",
             "Hola:\n\n"
             "Se desactivó el inicio de sesión en dos pasos en tu cuenta: al iniciar sesión solo "
             "se pedirá tu contraseña, y se olvidaron todos los dispositivos de confianza."},
        },
    [MAIL_NOTICE_BACKUP_CODE_USED] =
        {
            {"A backup code was used to sign in",
             "Hello,\n\n"
             "One of your two-factor backup codes was just used to sign in to your account. Each "
             "code works once; create new ones in your account settings when few are left."},
            {"Se usó un código de respaldo para iniciar sesión",
             "Hola:\n\n"
             "Se acaba de usar uno de tus códigos de respaldo para iniciar sesión en tu cuenta. "
             "Cada código sirve una sola vez; genera nuevos en la configuración de tu cuenta "
             "cuando queden pocos."},
        },
};
static const char account_notice_end_en[] =
    "\n\nIf this was you, there is nothing else to do. If it was not, reset your password right "
    "away with \"Forgot password\" on the sign-in page, and contact your organization's "
    "administrator.";
static const char account_notice_end_es[] =
    "\n\nSi fuiste tú, no tienes que hacer nada más. Si no, restablece tu contraseña cuanto "
    "antes con \"¿Olvidaste tu contraseña?\" en la página de inicio de sesión y contacta con el "
    "administrador de tu organización.";

/* ---- Buffer ---------------------------------------------------------------------------- */

static void sb_put_escaped(growbuf_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            growbuf_puts(b, "&amp;");
            break;
        case '<':
            growbuf_puts(b, "&lt;");
            break;
        case '>':
            growbuf_puts(b, "&gt;");
            break;
        case '"':
            growbuf_puts(b, "&quot;");
            break;
        case '\'':
            growbuf_puts(b, "&#39;");
            break;
        default:
            growbuf_put(b, s + i, 1);
            break;
        }
    }
}

/* ---- Rendering ------------------------------------------------------------------------- */

static bool is_es(const char *lang)
{
    return lang != NULL && strcmp(lang, "es") == 0;
}

static const char *lookup(const var_t *vars, const char *name, size_t n)
{
    for (; vars->name != NULL; vars++)
        if (strlen(vars->name) == n && memcmp(vars->name, name, n) == 0) return vars->value;
    return NULL;
}

static void put_value(growbuf_t *b, const char *v, enum mode mode)
{
    size_t n = strlen(v);

    if (mode == MODE_HTML) {
        sb_put_escaped(b, v, n);
    } else if (mode == MODE_SUBJECT) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)v[i];
            growbuf_put(b, (c < 0x20 || c == 0x7f) ? " " : v + i, 1);
        }
    } else {
        growbuf_put(b, v, n);
    }
}

static char *render(const char *tpl, const var_t *vars, enum mode mode)
{
    growbuf_t b = GROWBUF_INIT;

    if (mode == MODE_HTML) growbuf_puts(&b, "<p>");
    for (const char *p = tpl; *p;) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            const char *v = close ? lookup(vars, p + 1, (size_t)(close - p - 1)) : NULL;
            /* Every placeholder in the tables has a value; a miss is a template bug. */
            if (v == NULL) abort();
            if (mode == MODE_HTML && (size_t)(close - p) == 5 && memcmp(p, "{link", 5) == 0) {
                growbuf_puts(&b, "<a href=\"");
                put_value(&b, v, mode);
                growbuf_puts(&b, "\">");
                put_value(&b, v, mode);
                growbuf_puts(&b, "</a>");
            } else {
                put_value(&b, v, mode);
            }
            p = close + 1;
        } else if (mode == MODE_HTML && p[0] == '\n' && p[1] == '\n') {
            growbuf_puts(&b, "</p>\n<p>");
            p += 2;
        } else if (mode == MODE_HTML && p[0] == '\n') {
            growbuf_puts(&b, "<br>\n");
            p++;
        } else {
            size_t n = strcspn(p, "{\n");
            if (n == 0) n = 1; /* a lone newline outside HTML mode */
            if (mode == MODE_HTML)
                sb_put_escaped(&b, p, n);
            else
                growbuf_put(&b, p, n);
            p += n;
        }
    }
    if (mode == MODE_HTML) growbuf_puts(&b, "</p>");
    if (mode == MODE_TEXT) growbuf_puts(&b, "\n");
    if (b.data == NULL) growbuf_put(&b, "", 0);
    return b.data;
}

static void render_msg(const char *lang, const tpl_t *t, const var_t *vars, mail_msg_t *out)
{
    growbuf_t html = GROWBUF_INIT;
    char *body;

    out->subject = render(t->subject, vars, MODE_SUBJECT);
    out->text = render(t->body, vars, MODE_TEXT);
    body = render(t->body, vars, MODE_HTML);

    growbuf_puts(&html, "<!DOCTYPE html>\n<html lang=\"");
    growbuf_puts(&html, is_es(lang) ? "es" : "en");
    growbuf_puts(&html, "\">\n<head><meta charset=\"utf-8\"><title>");
    sb_put_escaped(&html, out->subject, strlen(out->subject));
    growbuf_puts(&html,
                 "</title></head>\n<body style=\"font-family: sans-serif; line-height: 1.5;\">\n");
    growbuf_puts(&html, body);
    growbuf_puts(&html, "\n</body>\n</html>\n");
    free(body);
    out->html = html.data;
}

/* ---- Public ---------------------------------------------------------------------------- */

void mail_msg_free(mail_msg_t *m)
{
    if (m == NULL) return;
    free(m->subject);
    free(m->text);
    free(m->html);
    m->subject = m->text = m->html = NULL;
}

int mail_render_verification(const char *lang, const char *link, mail_msg_t *out)
{
    if (link == NULL) return DOMAIN_EINVAL;
    var_t vars[] = {{"link", link}, {NULL, NULL}};
    render_msg(lang, is_es(lang) ? &verification_es : &verification_en, vars, out);
    return 0;
}

int mail_render_password_reset(const char *lang, const char *link, mail_msg_t *out)
{
    if (link == NULL) return DOMAIN_EINVAL;
    var_t vars[] = {{"link", link}, {NULL, NULL}};
    render_msg(lang, is_es(lang) ? &reset_es : &reset_en, vars, out);
    return 0;
}

int mail_render_invite(const char *lang, const char *link, const char *org_name, role_t role,
                       const char *inviter_name, mail_msg_t *out)
{
    static const char *const roles_en[] = {
        [ROLE_TEACHER] = "Teacher",
        [ROLE_COACH] = "Coach",
        [ROLE_MANAGER] = "Manager",
        [ROLE_ORG_ADMIN] = "Organization Admin",
    };
    static const char *const roles_es[] = {
        [ROLE_TEACHER] = "Docente",
        [ROLE_COACH] = "Coach",
        [ROLE_MANAGER] = "Gerente",
        [ROLE_ORG_ADMIN] = "Administrador de la organización",
    };
    bool es = is_es(lang);
    growbuf_t who = GROWBUF_INIT;

    if (link == NULL || org_name == NULL || !role_is_org_role(role)) return DOMAIN_EINVAL;
    if (inviter_name != NULL && inviter_name[0] != '\0') {
        growbuf_puts(&who, inviter_name);
        growbuf_puts(&who, es ? " te ha invitado" : " has invited you");
    } else {
        growbuf_puts(&who, es ? "Te han invitado" : "You have been invited");
    }

    var_t vars[] = {{"link", link},
                    {"org", org_name},
                    {"role", es ? roles_es[role] : roles_en[role]},
                    {"who", who.data},
                    {NULL, NULL}};
    render_msg(lang, es ? &invite_es : &invite_en, vars, out);
    free(who.data);
    return 0;
}

static int render_session(const char *lang, const mail_session_t *s, const tpl_t *en,
                          const tpl_t *es_tpl, mail_msg_t *out)
{
    bool es = is_es(lang);
    char duration[16];
    growbuf_t title = GROWBUF_INIT;

    if (s == NULL || s->coach_name == NULL || s->teacher_name == NULL || s->start == NULL ||
        s->duration_minutes <= 0)
        return DOMAIN_EINVAL;
    snprintf(duration, sizeof duration, "%d", s->duration_minutes);
    if (s->title != NULL && s->title[0] != '\0') {
        growbuf_puts(&title, "“");
        growbuf_puts(&title, s->title);
        growbuf_puts(&title, "”");
    } else {
        growbuf_puts(&title, es ? "tu mentoría" : "your mentorship");
    }

    var_t vars[] = {{"coach", s->coach_name}, {"teacher", s->teacher_name}, {"title", title.data},
                    {"start", s->start},      {"duration", duration},       {NULL, NULL}};
    render_msg(lang, es ? es_tpl : en, vars, out);
    free(title.data);
    return 0;
}

int mail_render_session_scheduled(const char *lang, const mail_session_t *s, mail_msg_t *out)
{
    return render_session(lang, s, &scheduled_en, &scheduled_es, out);
}

int mail_render_session_changed(const char *lang, const mail_session_t *s, mail_msg_t *out)
{
    return render_session(lang, s, &changed_en, &changed_es, out);
}

int mail_render_session_cancelled(const char *lang, const mail_session_t *s, mail_msg_t *out)
{
    return render_session(lang, s, &cancelled_en, &cancelled_es, out);
}

int mail_render_account_notice(const char *lang, mail_notice_t kind, mail_msg_t *out)
{
    if ((int)kind < 0 || kind >= MAIL_NOTICE_COUNT || account_notices[kind].en.subject == NULL)
        return DOMAIN_EINVAL;
    bool es = is_es(lang);
    const tpl_t *t = es ? &account_notices[kind].es : &account_notices[kind].en;
    growbuf_t body = GROWBUF_INIT;
    growbuf_puts(&body, t->body);
    growbuf_puts(&body, es ? account_notice_end_es : account_notice_end_en);
    tpl_t whole = {t->subject, body.data};
    var_t vars[] = {{NULL, NULL}};
    render_msg(lang, &whole, vars, out);
    free(body.data);
    return 0;
}
