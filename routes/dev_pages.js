// The development pages (routes/dev_pages.c): where the email links lead while FRONTEND_URL is
// unset in development. One script for the three paths; it renders the page of location.pathname
// in the language of ?lang= (en or es, default en) and talks to the API as a web client would.
// Text only through textContent (no innerHTML): nothing from the query or the API becomes markup.
'use strict';
(function () {
  const query = new URLSearchParams(location.search);
  const lang = query.get('lang') === 'es' ? 'es' : 'en';
  const MIN_PASSWORD = 8;

  const TEXT = {
    en: {
      other: 'Español',
      note: 'Development page served by coachd, because FRONTEND_URL is not set.',
      failed: 'Something went wrong: ',
      network: 'The server could not be reached.',
      unknownTitle: 'Unknown page',
      unknown: 'This address is not one of the email links. Open the link from the email again.',
      verifiedTitle: 'Email address verified',
      verified: 'Your email address is confirmed. You can close this page and sign in.',
      invalidTitle: 'This link is not valid',
      invalid: 'The verification link is unknown or was already used. Sign in and ask for a new one.',
      expiredTitle: 'This link has expired',
      expired: 'Verification links are valid for 24 hours. Sign in and ask for a new one.',
      otherTitle: 'The email address could not be verified',
      otherError: 'The verification failed ({code}).',
      resetTitle: 'Choose a new password',
      resetIntro: 'Enter your new password twice. It needs at least 8 characters.',
      newPassword: 'New password',
      confirmPassword: 'Confirm the new password',
      savePassword: 'Save password',
      tooShort: 'The password needs at least 8 characters.',
      mismatch: 'The two passwords differ.',
      resetDone: 'Your password has been changed. You can now sign in with it.',
      resetFailed: 'The password could not be changed: ',
      noToken: 'This link is incomplete: it carries no token. Open the link from the email again.',
      inviteTitle: 'Invitation',
      organization: 'Organization',
      role: 'Role',
      email: 'Email',
      status: 'Status',
      loading: 'Loading…',
      inviteMissing: 'This invitation does not exist, or a newer email replaced it.',
      notAvailable: 'This invitation can no longer be answered.',
      signedInAs: 'Signed in as {email}.',
      otherUser: 'You are signed in as {email}, but this invitation is for {invitee}.',
      signOut: 'Sign out',
      accept: 'Accept',
      decline: 'Decline',
      accepted: 'You joined {org} as {role}.',
      declined: 'You declined the invitation to {org}.',
      notPending: 'This invitation is not among your pending ones.',
      signInIntro: 'You already have an account. Sign in to answer the invitation.',
      password: 'Password',
      signIn: 'Sign in',
      signUpIntro: 'Create your account to join {org}.',
      firstName: 'First name',
      lastName: 'Last name',
      confirm: 'Confirm the password',
      signUp: 'Create account and join',
      statuses: { pending: 'Pending', accepted: 'Accepted', revoked: 'Declined', expired: 'Expired' },
      roles: {
        OrganizationAdmin: 'Organization Admin', Manager: 'Manager', Coach: 'Coach', Teacher: 'Teacher',
      },
    },
    es: {
      other: 'English',
      note: 'Página de desarrollo servida por coachd, porque FRONTEND_URL no está definida.',
      failed: 'Algo salió mal: ',
      network: 'No se pudo contactar con el servidor.',
      unknownTitle: 'Página desconocida',
      unknown: 'Esta dirección no es uno de los enlaces del correo. Vuelve a abrir el enlace del correo.',
      verifiedTitle: 'Correo electrónico verificado',
      verified: 'Tu dirección de correo electrónico está confirmada. Puedes cerrar esta página e iniciar sesión.',
      invalidTitle: 'Este enlace no es válido',
      invalid: 'El enlace de verificación es desconocido o ya se usó. Inicia sesión y solicita uno nuevo.',
      expiredTitle: 'Este enlace ha caducado',
      expired: 'Los enlaces de verificación son válidos durante 24 horas. Inicia sesión y solicita uno nuevo.',
      otherTitle: 'No se pudo verificar la dirección de correo electrónico',
      otherError: 'La verificación falló ({code}).',
      resetTitle: 'Elige una nueva contraseña',
      resetIntro: 'Escribe tu nueva contraseña dos veces. Necesita al menos 8 caracteres.',
      newPassword: 'Nueva contraseña',
      confirmPassword: 'Confirma la nueva contraseña',
      savePassword: 'Guardar contraseña',
      tooShort: 'La contraseña necesita al menos 8 caracteres.',
      mismatch: 'Las dos contraseñas no coinciden.',
      resetDone: 'Tu contraseña ha cambiado. Ya puedes iniciar sesión con ella.',
      resetFailed: 'No se pudo cambiar la contraseña: ',
      noToken: 'Este enlace está incompleto: no lleva ningún token. Vuelve a abrir el enlace del correo.',
      inviteTitle: 'Invitación',
      organization: 'Organización',
      role: 'Rol',
      email: 'Correo electrónico',
      status: 'Estado',
      loading: 'Cargando…',
      inviteMissing: 'Esta invitación no existe, o un correo más reciente la reemplazó.',
      notAvailable: 'Esta invitación ya no puede responderse.',
      signedInAs: 'Sesión iniciada como {email}.',
      otherUser: 'Has iniciado sesión como {email}, pero esta invitación es para {invitee}.',
      signOut: 'Cerrar sesión',
      accept: 'Aceptar',
      decline: 'Rechazar',
      accepted: 'Te uniste a {org} con el rol de {role}.',
      declined: 'Rechazaste la invitación a {org}.',
      notPending: 'Esta invitación no está entre tus invitaciones pendientes.',
      signInIntro: 'Ya tienes una cuenta. Inicia sesión para responder a la invitación.',
      password: 'Contraseña',
      signIn: 'Iniciar sesión',
      signUpIntro: 'Crea tu cuenta para unirte a {org}.',
      firstName: 'Nombre',
      lastName: 'Apellido',
      confirm: 'Confirma la contraseña',
      signUp: 'Crear cuenta y unirme',
      statuses: { pending: 'Pendiente', accepted: 'Aceptada', revoked: 'Rechazada', expired: 'Caducada' },
      roles: {
        OrganizationAdmin: 'Administrador de la organización', Manager: 'Gerente', Coach: 'Coach',
        Teacher: 'Docente',
      },
    },
  }[lang];

  function t(key, vars) {
    return TEXT[key].replace(/\{(\w+)\}/g, (m, name) => (vars && name in vars ? vars[name] : m));
  }

  // el('p', {id: 'x', class: 'muted'}, 'text', child, ...)
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === 'class') node.className = value;
      else if (value === true) node.setAttribute(name, '');
      else if (value !== false && value != null) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child != null) node.append(child);
    }
    return node;
  }

  const app = document.getElementById('app');

  function page(title, ...content) {
    document.title = title + ' · coachd';
    const other = new URLSearchParams(location.search);
    other.set('lang', lang === 'es' ? 'en' : 'es');
    app.replaceChildren(
      el('div', { class: 'brand' }, el('span', null, 'coachd'),
        el('a', { id: 'lang-switch', href: '?' + other.toString(), hreflang: lang === 'es' ? 'en' : 'es' },
          TEXT.other)),
      el('h1', { id: 'title' }, title),
      ...content);
  }

  function result(state, text) {
    const node = el('p', { id: 'result', class: 'result', role: 'status' });
    if (state) {
      node.dataset.state = state;
      node.textContent = text;
    }
    return node;
  }

  function setResult(state, text) {
    const node = document.getElementById('result');
    node.dataset.state = state;
    node.textContent = text;
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, data: null };
    }
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    return { ok: res.ok, status: res.status, data };
  }

  // The API's error message, with the message of each field it names.
  function apiError(res) {
    const e = res.data && res.data.error;
    if (!e) return res.status ? 'HTTP ' + res.status : TEXT.network;
    const fields = (e.details || []).map((d) => (d.field ? d.field + ': ' : '') + d.message);
    return fields.length ? e.message + ' (' + fields.join('; ') + ')' : e.message;
  }

  function field(id, label, attrs) {
    return el('label', { for: id }, label, el('input', Object.assign({ id, name: id }, attrs)));
  }

  function passwordPair(first, second, ids) {
    return [
      field(ids[0], first, { type: 'password', autocomplete: 'new-password', required: true,
        minlength: String(MIN_PASSWORD) }),
      field(ids[1], second, { type: 'password', autocomplete: 'new-password', required: true,
        minlength: String(MIN_PASSWORD) }),
    ];
  }

  // null when the two fields are a usable new password, else the reason.
  function checkPair(ids) {
    const a = document.getElementById(ids[0]).value;
    const b = document.getElementById(ids[1]).value;
    if (a.length < MIN_PASSWORD) return TEXT.tooShort;
    if (a !== b) return TEXT.mismatch;
    return null;
  }

  // Runs `work` on submit with the form's buttons disabled; the browser's own validation is off
  // (novalidate), so the page's messages are the ones shown.
  function onSubmit(form, work) {
    form.noValidate = true;
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const buttons = form.querySelectorAll('button');
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await work();
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
      }
    });
  }

  // ---- /email-verification?lang=..[&error=..] ----

  function emailVerification() {
    const error = query.get('error');
    if (!error) {
      page(TEXT.verifiedTitle, result('ok', TEXT.verified));
    } else if (error === 'invalid_token') {
      page(TEXT.invalidTitle, result('error', TEXT.invalid));
    } else if (error === 'token_expired') {
      page(TEXT.expiredTitle, result('error', TEXT.expired));
    } else {
      page(TEXT.otherTitle, result('error', t('otherError', { code: error })));
    }
  }

  // ---- /reset-password?token=.. ----

  function resetPassword() {
    const token = query.get('token');
    if (!token) {
      page(TEXT.resetTitle, result('error', TEXT.noToken));
      return;
    }
    const ids = ['password', 'confirm'];
    const form = el('form', { id: 'reset-form' },
      ...passwordPair(TEXT.newPassword, TEXT.confirmPassword, ids),
      el('div', { class: 'actions' }, el('button', { id: 'save', type: 'submit' }, TEXT.savePassword)));
    const intro = el('p', { class: 'muted' }, TEXT.resetIntro);
    page(TEXT.resetTitle, intro, form, result());
    onSubmit(form, async () => {
      const wrong = checkPair(ids);
      if (wrong) {
        setResult('error', wrong);
        return;
      }
      const res = await api('POST', '/api/auth/reset-password',
        { token, newPassword: document.getElementById('password').value });
      if (res.ok) {
        intro.remove();
        form.remove();
        setResult('ok', TEXT.resetDone);
      } else {
        setResult('error', TEXT.resetFailed + apiError(res));
      }
    });
  }

  // ---- /invite?token=.. ----

  function roleName(role) {
    return TEXT.roles[role] || role;
  }

  function inviteDetails(inv) {
    return el('dl', { id: 'invite' },
      el('dt', null, TEXT.organization), el('dd', { id: 'invite-org' }, inv.organizationName),
      el('dt', null, TEXT.role), el('dd', { id: 'invite-role' }, roleName(inv.roleInOrganization)),
      el('dt', null, TEXT.email), el('dd', { id: 'invite-email' }, inv.email),
      el('dt', null, TEXT.status),
      el('dd', { id: 'invite-status', 'data-status': inv.status }, TEXT.statuses[inv.status] || inv.status));
  }

  async function invite() {
    const token = query.get('token');
    page(TEXT.inviteTitle, el('p', { class: 'muted' }, TEXT.loading));
    if (!token) {
      page(TEXT.inviteTitle, result('error', TEXT.noToken));
      return;
    }
    const res = await api('GET', '/api/invites/' + encodeURIComponent(token));
    if (!res.ok) {
      page(TEXT.inviteTitle,
        result('error', res.status === 404 || res.status === 400 ? TEXT.inviteMissing : TEXT.failed + apiError(res)));
      return;
    }
    const inv = res.data.data;
    if (!inv.isAvailable) {
      page(TEXT.inviteTitle, inviteDetails(inv), result('error', TEXT.notAvailable));
      return;
    }
    const session = await api('GET', '/api/auth/session');
    const user = session.ok && session.data ? session.data.user : null;
    if (user && user.email.toLowerCase() === inv.email.toLowerCase()) {
      await answerForm(inv, user);
    } else if (user) {
      const out = el('button', { id: 'sign-out', type: 'button', class: 'secondary' }, TEXT.signOut);
      page(TEXT.inviteTitle, inviteDetails(inv),
        el('p', { id: 'other-user' }, t('otherUser', { email: user.email, invitee: inv.email })),
        el('div', { class: 'actions' }, out), result());
      out.addEventListener('click', async () => {
        out.disabled = true;
        const r = await api('POST', '/api/auth/sign-out');
        if (r.ok) invite();
        else setResult('error', TEXT.failed + apiError(r));
      });
    } else if (inv.hasAccount) {
      signInForm(inv);
    } else {
      signUpForm(inv, token);
    }
  }

  // Signed in as the invitee: the invite's id comes from the pending list (the token's answer
  // has none), the one of the same organization, role, address and expiry.
  async function answerForm(inv, user) {
    const pending = await api('GET', '/api/invites/my-pending');
    if (!pending.ok) {
      page(TEXT.inviteTitle, inviteDetails(inv), result('error', TEXT.failed + apiError(pending)));
      return;
    }
    const mine = pending.data.data.find((p) => p.organizationName === inv.organizationName &&
      p.roleInOrganization === inv.roleInOrganization && p.expiresAt === inv.expiresAt &&
      p.email.toLowerCase() === inv.email.toLowerCase());
    const who = el('p', { id: 'signed-in', class: 'muted' }, t('signedInAs', { email: user.email }));
    if (!mine) {
      page(TEXT.inviteTitle, inviteDetails(inv), who, result('error', TEXT.notPending));
      return;
    }
    const accept = el('button', { id: 'accept', type: 'button' }, TEXT.accept);
    const decline = el('button', { id: 'decline', type: 'button', class: 'secondary' }, TEXT.decline);
    const actions = el('div', { class: 'actions' }, accept, decline);
    page(TEXT.inviteTitle, inviteDetails(inv), who, actions, result());
    async function answer(what) {
      accept.disabled = decline.disabled = true;
      const r = await api('POST', '/api/invites/' + encodeURIComponent(mine.id) + '/' + what);
      if (r.ok) {
        actions.remove();
        const status = document.getElementById('invite-status');
        status.dataset.status = r.data.data.status;
        status.textContent = TEXT.statuses[r.data.data.status] || r.data.data.status;
        setResult('ok', what === 'accept'
          ? t('accepted', { org: inv.organizationName, role: roleName(inv.roleInOrganization) })
          : t('declined', { org: inv.organizationName }));
      } else {
        accept.disabled = decline.disabled = false;
        setResult('error', TEXT.failed + apiError(r));
      }
    }
    accept.addEventListener('click', () => answer('accept'));
    decline.addEventListener('click', () => answer('decline'));
  }

  function signInForm(inv) {
    const form = el('form', { id: 'signin-form' },
      field('signin-email', TEXT.email, { type: 'email', value: inv.email, readonly: true,
        autocomplete: 'username' }),
      field('signin-password', TEXT.password, { type: 'password', required: true,
        autocomplete: 'current-password' }),
      el('div', { class: 'actions' }, el('button', { id: 'sign-in', type: 'submit' }, TEXT.signIn)));
    page(TEXT.inviteTitle, inviteDetails(inv), el('p', { class: 'muted' }, TEXT.signInIntro), form,
      result());
    onSubmit(form, async () => {
      const r = await api('POST', '/api/auth/sign-in/email',
        { email: inv.email, password: document.getElementById('signin-password').value });
      if (r.ok) invite();
      else setResult('error', TEXT.failed + apiError(r));
    });
  }

  // POST /api/invites/accept creates the account and its membership but signs nobody in: the
  // page signs in with the new password afterwards.
  function signUpForm(inv, token) {
    const ids = ['signup-password', 'signup-confirm'];
    const form = el('form', { id: 'signup-form' },
      el('div', { class: 'row' },
        field('first-name', TEXT.firstName, { type: 'text', required: true, maxlength: '100',
          autocomplete: 'given-name' }),
        field('last-name', TEXT.lastName, { type: 'text', required: true, maxlength: '100',
          autocomplete: 'family-name' })),
      field('signup-email', TEXT.email, { type: 'email', value: inv.email, readonly: true,
        autocomplete: 'username' }),
      ...passwordPair(TEXT.password, TEXT.confirm, ids),
      el('div', { class: 'actions' }, el('button', { id: 'sign-up', type: 'submit' }, TEXT.signUp)));
    const intro = el('p', { class: 'muted' }, t('signUpIntro', { org: inv.organizationName }));
    page(TEXT.inviteTitle, inviteDetails(inv), intro, form, result());
    onSubmit(form, async () => {
      const wrong = checkPair(ids);
      if (wrong) {
        setResult('error', wrong);
        return;
      }
      const password = document.getElementById('signup-password').value;
      const body = {
        token,
        firstName: document.getElementById('first-name').value.trim(),
        lastName: document.getElementById('last-name').value.trim(),
        password,
      };
      if (query.get('lang')) body.preferredLanguage = lang;
      const r = await api('POST', '/api/invites/accept', body);
      if (!r.ok) {
        setResult('error', TEXT.failed + apiError(r));
        return;
      }
      const s = await api('POST', '/api/auth/sign-in/email', { email: inv.email, password });
      intro.remove();
      form.remove();
      const status = document.getElementById('invite-status');
      status.dataset.status = 'accepted';
      status.textContent = TEXT.statuses.accepted;
      const done = t('accepted', { org: inv.organizationName, role: roleName(r.data.data.roleInOrganization) });
      if (s.ok) {
        setResult('ok', done + ' ' + t('signedInAs', { email: inv.email }));
      } else {
        setResult('ok', done);
      }
    });
  }

  document.documentElement.lang = lang;
  document.getElementById('note').textContent = TEXT.note;
  const pages = {
    '/email-verification': emailVerification,
    '/reset-password': resetPassword,
    '/invite': invite,
  };
  // The server serves these pages on variants of their paths too ("/invite/", "//invite",
  // "/%69nvite"), so the page is chosen on the path decoded and without empty segments. An
  // unknown path shows no page's outcome (never "verified").
  let path = location.pathname;
  try {
    path = decodeURIComponent(path);
  } catch (e) { /* malformed escape: as it is */ }
  path = '/' + path.split('/').filter((s) => s !== '').join('/');
  const render = Object.prototype.hasOwnProperty.call(pages, path) ? pages[path] : null;
  if (render) render();
  else page(TEXT.unknownTitle, result('error', TEXT.unknown));
}());
