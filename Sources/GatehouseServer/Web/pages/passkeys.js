// Passkeys on Gatehouse's pages, the pages' one script (loaded with the page's nonce). On the account page it adds a
// passkey; on the sign-in page it signs in with one, from the button or the browser's autofill. The requests go to
// this server's page routes with the session cookie; the account page's also carry its token (X-CSRF-Token).
"use strict";

(() => {
  // What a refusal says, by the server's code or the browser's DOMException name: words of the page's language, which
  // the page gives as JSON in its passkey section's data-words (its string table's passkey_script_* keys).
  let words = {};
  try {
    words = JSON.parse(document.querySelector("[data-words]").dataset.words);
  } catch (ignored) { /* no words given: the server's message, or the fallback */ }
  const messages = {
    webauthn_credential_exists: words.exists,
    InvalidStateError: words.exists,
    NotAllowedError: words.cancelled,
    insufficient_aal: words.needs_code,
    reauthentication_needed: words.reauthenticate,
    webauthn_challenge_expired: words.too_slow,
    webauthn_challenge_not_found: words.too_slow,
    webauthn_credential_not_found: words.unknown,
    webauthn_verification_failed: words.not_verified,
    too_many_passkeys: words.too_many,
    over_request_rate_limit: words.rate_limited,
    cross_site_request: words.stale,
    no_authorization: words.signed_out,
    SecurityError: words.insecure,
    NotSupportedError: words.unsupported,
  };
  const fallback = words.fallback || "Something went wrong. Try again.";

  // The server's refusals carry a string code; a DOMException's `code` is a legacy number, its name says it.
  const say = (element, error) => {
    const server = error && typeof error.code === "string";
    const key = server ? error.code : (error && error.name) || "";
    if (key === "AbortError") return;
    element.textContent = messages[key] || (server && error.message) || fallback;
  };

  // base64url text to an ArrayBuffer, and back.
  const bytes = (text) => {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0)).buffer;
  };
  const text = (buffer) =>
    btoa(String.fromCharCode(...new Uint8Array(buffer))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

  const descriptors = (list) => (list || []).map((c) => ({ ...c, id: bytes(c.id) }));
  const creationOptions = (o) => ({
    ...o, challenge: bytes(o.challenge), user: { ...o.user, id: bytes(o.user.id) },
    excludeCredentials: descriptors(o.excludeCredentials),
  });
  const requestOptions = (o) => ({
    ...o, challenge: bytes(o.challenge), allowCredentials: descriptors(o.allowCredentials),
  });

  // The credential in the W3C JSON form: toJSON() where the browser has it, written out where it does not.
  const json = (credential) => {
    if (typeof credential.toJSON === "function") {
      try { return credential.toJSON(); } catch (ignored) { /* written out below */ }
    }
    const r = credential.response;
    const response = { clientDataJSON: text(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = text(r.attestationObject);
      response.transports = typeof r.getTransports === "function" ? r.getTransports() : [];
    } else {
      response.authenticatorData = text(r.authenticatorData);
      response.signature = text(r.signature);
      if (r.userHandle) response.userHandle = text(r.userHandle);
    }
    return {
      id: credential.id, rawId: text(credential.rawId), type: credential.type, response,
      authenticatorAttachment: credential.authenticatorAttachment || undefined,
      clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
    };
  };

  // POSTs JSON to a page route; a refusal throws with the server's code and message.
  const post = async (path, body, token) => {
    const headers = { "Content-Type": "application/json" };
    if (token) headers["X-CSRF-Token"] = token;
    const response = await fetch(path, {
      method: "POST", headers, body: JSON.stringify(body || {}), credentials: "same-origin", cache: "no-store",
    });
    let answer = null;
    try { answer = await response.json(); } catch (ignored) { /* a page, not JSON: the fallback says it */ }
    if (!response.ok) {
      throw Object.assign(new Error((answer && answer.message) || fallback), { code: answer && answer.code });
    }
    return answer || {};
  };

  const supported = typeof window.PublicKeyCredential === "function" && !!navigator.credentials;

  // The account page: "Add a passkey".
  const section = document.getElementById("passkeys");
  if (section && supported) {
    const token = section.dataset.csrfToken;
    const add = document.getElementById("add-passkey");
    const status = document.getElementById("passkey-error");
    document.getElementById("passkey-unsupported").hidden = true;
    add.hidden = false;
    let busy = false;
    add.addEventListener("click", async () => {
      if (busy) return;
      busy = true;
      status.textContent = "";
      try {
        const given = await post("/account/passkeys/options", {}, token);
        const credential = await navigator.credentials.create({ publicKey: creationOptions(given.options) });
        const body = { challenge_id: given.challenge_id, credential: json(credential) };
        const added = await post("/account/passkeys/add", body, token);
        location.assign(added.location || "/account");
      } catch (error) {
        say(status, error);
      } finally {
        busy = false;
      }
    });
  }

  // The sign-in page: the button, and the autofill's passkeys (conditional mediation) from the page's load.
  const signIn = document.getElementById("passkey-sign-in");
  if (signIn && supported) {
    const button = document.getElementById("passkey-button");
    const status = document.getElementById("passkey-error");
    signIn.hidden = false;
    let autofill = null; // {controller, done} of the pending autofill request

    // Options not spent yet, kept for this tab while they live: the autofill's, reused by the button and by the next
    // load of this page, so that showing the page does not ask the server each time.
    const kept = "gatehouse.passkeyOptions";
    const keep = (value) => {
      try {
        if (value) sessionStorage.setItem(kept, JSON.stringify(value)); else sessionStorage.removeItem(kept);
      } catch (ignored) { /* no storage: asked again next time */ }
    };
    let given = null;
    try { given = JSON.parse(sessionStorage.getItem(kept)); } catch (ignored) { /* none kept */ }

    const options = async () => {
      if (!given || !given.options || given.expires_at * 1000 < Date.now() + 30000) {
        given = await post("/account/sign-in/passkey/options");
        keep(given);
      }
      return given;
    };
    const finish = async (used, credential) => {
      given = null; // its challenge is spent, whatever the answer
      keep(null);
      try {
        const body = { challenge_id: used.challenge_id, credential: json(credential) };
        const answer = await post("/account/sign-in/passkey", body);
        location.assign(answer.location || "/account");
      } catch (error) {
        // The passkey was removed here: the browser or password manager may forget it too.
        if (error.code === "webauthn_credential_not_found" && PublicKeyCredential.signalUnknownCredential) {
          PublicKeyCredential.signalUnknownCredential({ rpId: used.options.rpId, credentialId: credential.id })
            .catch(() => {});
        }
        throw error;
      }
    };
    const startAutofill = () => {
      const controller = new AbortController();
      const done = (async () => {
        try {
          const available = typeof PublicKeyCredential.isConditionalMediationAvailable === "function"
            && await PublicKeyCredential.isConditionalMediationAvailable();
          if (!available || controller.signal.aborted) return;
          const used = await options();
          if (controller.signal.aborted) return;
          const credential = await navigator.credentials.get({
            publicKey: requestOptions(used.options), mediation: "conditional", signal: controller.signal,
          });
          await finish(used, credential);
        } catch (error) {
          // Nobody pressed anything: an autofill request that ends unanswered says nothing.
          if (!controller.signal.aborted && error.name !== "NotAllowedError") say(status, error);
        }
      })();
      autofill = { controller, done };
    };

    let busy = false;
    button.addEventListener("click", async () => {
      if (busy) return;
      busy = true;
      if (autofill) {
        const pending = autofill;
        autofill = null;
        pending.controller.abort();
        await pending.done;
      }
      status.textContent = "";
      try {
        const used = await options();
        const credential = await navigator.credentials.get({ publicKey: requestOptions(used.options) });
        await finish(used, credential);
      } catch (error) {
        say(status, error);
        startAutofill();
      } finally {
        busy = false;
      }
    });
    startAutofill();
  }
})();
