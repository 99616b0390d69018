"""What the browser tests stand on: the server's API and outbox, a headless Chromium, and the checks every page gets.

Nothing here waits a fixed time: mail, pages and statuses are polled until they appear or a deadline passes.
"""

import email
import email.policy
import json
import os
import re
import subprocess
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

import selenium_axe_python
from axe_selenium_python import Axe
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.virtual_authenticator import Protocol, Transport, VirtualAuthenticatorOptions
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 15  # seconds any one page, mail or answer may take
# axe-selenium-python runs axe-core 3.1 (2018) unless given a script: this is 4.9, from its maintained fork's wheel,
# which knows today's HTML (the `one-time-code` autofill token, `username` on type=email) and WCAG 2.2's rules.
AXE_CORE = os.path.join(os.path.dirname(selenium_axe_python.__file__), "axe-core", "axe.min.js")
# The pages' one script: the passkey buttons (account and sign-in pages, with passkeys on), loaded by its nonce.
PASSKEY_SCRIPT = "/account/passkeys.js"
FOCUSABLE = (
    "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select:not([disabled]), "
    "textarea:not([disabled]), [tabindex]:not([tabindex='-1'])"
)


class CheckFailed(AssertionError):
    """One expectation a person would notice, unmet."""


class Checks:
    """Counts the checks that passed; the first that fails ends its test."""

    def __init__(self):
        self.passed = 0
        self.pages = {}  # data-page name: None when it passed the common page checks, else why it failed

    def __call__(self, condition, message):
        if not condition:
            raise CheckFailed(message)
        self.passed += 1

    def equal(self, actual, expected, message):
        self(actual == expected, f"{message}: expected {expected!r}, got {actual!r}")


# --- the server, as a client or a scanner sees it ------------------------------------------------------------


class Server:
    """The running binary: its JSON API, its outbox, its command line."""

    def __init__(self, base, data_dir, binary):
        self.base = base.rstrip("/")
        self.data_dir = data_dir
        self.binary = binary
        self.outbox = Outbox(os.path.join(data_dir, "outbox"))

    def request(self, method, path, body=None, token=None, form=None, headers=None, follow=True, raw=None):
        """(status, headers, text) of one request; HTTP errors are answers, not exceptions. `body` is sent as JSON,
        `form` as a form, `raw` (text) as it is, with the Content-Type `headers` give (else application/xml)."""
        url = path if path.startswith("http") else self.base + path
        data = None
        sent = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        elif raw is not None:
            data = raw.encode()
            sent.setdefault("Content-Type", "application/xml")
        if token:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(url, data=data, method=method, headers=sent)
        opener = urllib.request.build_opener() if follow else urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=WAIT) as response:
                return response.status, dict(response.headers), response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode("utf-8", "replace")

    def api(self, method, path, body=None, token=None):
        """(status, decoded JSON or None) of a JSON API call."""
        status, _, text = self.request(method, path, body=body, token=token)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, None

    def sign_up(self, check, email, password, first_name=None):
        """A confirmed account: sign-up, the mailed code, verify. Returns the session."""
        body = {"email": email, "password": password}
        if first_name:
            body["data"] = {"first_name": first_name}
        status, answer = self.api("POST", "/auth/v1/signup", body)
        check(status == 200, f"sign-up of {email} answered {status}: {answer}")
        code = self.outbox.next(email).code
        return self.verify_code(check, email, code, "signup")

    def verify_code(self, check, email, code, kind):
        status, session = self.api("POST", "/auth/v1/verify", {"type": kind, "email": email, "token": code})
        check(status == 200 and "access_token" in (session or {}), f"verify {kind} of {email}: {status} {session}")
        return session

    def password_grant(self, email, password):
        return self.api("POST", "/auth/v1/token?grant_type=password", {"email": email, "password": password})

    def magic_link(self, check, email):
        """Asks for a sign-in mail and returns it (its link and code)."""
        status, answer = self.api("POST", "/auth/v1/otp", {"email": email})
        check(status == 200, f"otp for {email} answered {status}: {answer}")
        return self.outbox.next(email)

    def cli(self, *args):
        """Runs `gatehouse ARGS --data-dir DATA`, like an operator."""
        return subprocess.run(
            [self.binary, *args, "--data-dir", self.data_dir], capture_output=True, text=True, timeout=60
        )


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Mail:
    def __init__(self, path, message):
        self.path = path
        self.to = str(message["To"] or "")
        self.subject = str(message["Subject"] or "")
        part = message.get_body(preferencelist=("plain",))
        self.text = part.get_content().replace("\r", "") if part else ""
        found = re.search(r"^\s*(\d{6})\s*$", self.text, re.M)
        self.code = found.group(1) if found else None
        links = re.findall(r"https?://\S+/auth/v1/verify\?\S+", self.text)
        self.link = links[0] if links else None
        # A company's invitation: its link to the account page, which names the invitation by its token.
        invitations = re.findall(r"https?://\S+/account\?invitation=[A-Za-z0-9_\-]+", self.text)
        self.invitation = invitations[0] if invitations else None


class Outbox:
    """The development outbox: one .eml per mail. Each mail is handed out once."""

    def __init__(self, directory):
        self.directory = directory
        self.seen = set()

    def next(self, to, deadline=WAIT):
        """The first mail to `to` not handed out yet, waiting for it to arrive."""
        end = time.monotonic() + deadline
        while True:
            for path in self._files():
                if path in self.seen:
                    continue
                mail = self._read(path)
                if mail is None:
                    continue  # still being written
                if to.lower() in mail.to.lower():
                    self.seen.add(path)
                    return mail
            if time.monotonic() > end:
                raise CheckFailed(f"no new mail to {to} in the outbox within {deadline}s")
            time.sleep(0.05)  # polling interval, not a wait for state

    def skip_all(self):
        """Marks every mail so far as handed out."""
        self.seen.update(self._files())

    def _files(self):
        try:
            names = [n for n in os.listdir(self.directory) if n.endswith(".eml")]
        except FileNotFoundError:
            return []
        paths = [os.path.join(self.directory, n) for n in names]
        return sorted(paths, key=lambda p: (os.path.getmtime(p), p))

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as file:
                message = email.message_from_bytes(file.read(), policy=email.policy.default)
            mail = Mail(path, message)
            return mail if mail.to and (mail.code or mail.link or mail.invitation) else None
        except Exception:
            return None


# --- the browser ------------------------------------------------------------------------------------------------


def new_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=420,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # Chromium keeps a desktop window at least 500 px wide: a phone's viewport is emulated.
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 420, "height": 900, "deviceScaleFactor": 1, "mobile": True}
    )
    driver.set_page_load_timeout(WAIT)
    return driver


class Browser:
    """One person's browser, driven by keyboard where the test says so."""

    def __init__(self, server, check, shots):
        self.server = server
        self.check = check
        self.shots = shots
        self.failures = []  # pages of this test that failed their audit
        self.driver = new_driver()

    def close(self):
        self.driver.quit()

    def add_passkey_authenticator(self):
        """A platform authenticator in the browser (the DevTools WebAuthn domain): it makes discoverable passkeys
        and verifies the user without asking, as a phone's screen lock would."""
        options = VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2, transport=Transport.INTERNAL, has_resident_key=True,
            has_user_verification=True, is_user_verified=True,
        )
        self.driver.add_virtual_authenticator(options)

    def without_passkey_autofill(self):
        """From the next page on, the browser offers no passkeys in a field's autofill (conditional mediation), as
        browsers without it: the virtual authenticator would otherwise answer the sign-in page's autofill request
        at once, before any button is pressed."""
        self.driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument",
            {
                "source": "if (window.PublicKeyCredential) Object.defineProperty(PublicKeyCredential, "
                "'isConditionalMediationAvailable', {value: async () => false});"
            },
        )

    # navigation -------------------------------------------------------------------------------------------------

    def open(self, url, page):
        """Opens `url` and expects page `page` there."""
        self.driver.get(url if url.startswith("http") else self.server.base + url)
        return self.expect(page)

    def page_name(self):
        return self.driver.execute_script(
            "const m = document.querySelector('main[data-page]'); return m ? m.getAttribute('data-page') : null;"
        )

    def describe(self):
        """What is on screen, for a failure message."""
        d = self.driver
        text = d.execute_script("return document.body ? document.body.innerText : ''") or ""
        return f"url {d.current_url}, title {d.title!r}, data-page {self.page_name()!r}, text {text[:300]!r}"

    def expect(self, page):
        try:
            WebDriverWait(self.driver, WAIT).until(
                lambda d: d.execute_script("return document.readyState") == "complete"
            )
        except TimeoutException:
            pass
        if page is not None:
            self.check(self.page_name() == page, f"expected page {page!r}; {self.describe()}")
        return self

    def submit(self, key, page):
        """Presses `key` on the focused control and waits for the next document, which must be page `page`."""
        self.driver.execute_script("window.__gatehouseOld = true")
        ActionChains(self.driver).send_keys(key).perform()
        try:
            WebDriverWait(self.driver, WAIT).until(
                lambda d: d.execute_script(
                    "return !window.__gatehouseOld && document.readyState === 'complete'"
                )
            )
        except TimeoutException:
            raise CheckFailed(f"pressing {key!r} loaded no new page within {WAIT}s; {self.describe()}")
        return self.expect(page)

    def css(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector):
        found = self.css(selector)
        self.check(len(found) >= 1, f"no {selector} on page {self.page_name()!r}; {self.describe()}")
        return found[0]

    def text(self, selector):
        return self.one(selector).text.strip()

    # the keyboard ------------------------------------------------------------------------------------------------

    def active_matches(self, selector):
        return self.driver.execute_script(
            "const e = document.activeElement; return !!e && e !== document.body && e.matches(arguments[0]);",
            selector,
        )

    def tab_to(self, selector, limit=40):
        """Presses TAB until the focused element matches `selector`."""
        self.one(selector)
        for _ in range(limit):
            if self.active_matches(selector):
                return
            ActionChains(self.driver).send_keys(Keys.TAB).perform()
        raise CheckFailed(f"{selector} not reached with {limit} presses of TAB on page {self.page_name()!r}")

    def type_into(self, selector, text):
        """TAB to a field, select what it holds, type `text`."""
        self.tab_to(selector)
        ActionChains(self.driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        ActionChains(self.driver).send_keys(Keys.DELETE).send_keys(text).perform()
        value = self.driver.execute_script("return document.activeElement.value")
        self.check(value == text, f"typed {text!r} into {selector}, it holds {value!r}")

    def press_on(self, selector, page, key=Keys.ENTER):
        """TAB to a control and press ENTER (or SPACE): the next page must be `page`."""
        self.tab_to(selector)
        return self.submit(key, page)

    # the checks every page gets ------------------------------------------------------------------------------

    def audit(self, page, shots=True):
        """Renders, has no script but the passkey one, passes axe in light and dark, every control reachable by TAB
        with a visible focus indicator; saves NAME-light.png and NAME-dark.png. A page that fails these is recorded
        and the test goes on to the next page (its flow still works), failing at its end."""
        self.expect(page)
        try:
            self._audit(page, shots)
            self.check.pages.setdefault(page, None)
        except CheckFailed as failure:
            self.check.pages[page] = str(failure)
            self.failures.append(str(failure))
            print(f"      page {page} failed: {failure}", flush=True)
        finally:
            self.color_scheme("light")
            self.driver.execute_script("if (document.activeElement) document.activeElement.blur(); scrollTo(0, 0)")
        return self

    def _audit(self, page, shots):
        c = self.check
        d = self.driver
        c(bool(d.title.strip()), f"page {page}: empty <title>")
        lang = d.execute_script("return document.documentElement.getAttribute('lang')")
        c(bool(lang and lang.strip()), f"page {page}: <html> has no lang")
        c(len(self.css("h1")) >= 1 and bool(self.text("h1")), f"page {page}: no <h1> with text")
        scripts = d.execute_script(
            "return [...document.scripts].map(s => [s.getAttribute('src'), !!s.nonce, s.textContent.trim().length])"
        )
        c(
            all(src == PASSKEY_SCRIPT and nonce and not inline for src, nonce, inline in scripts) and len(scripts) <= 1,
            f"page {page}: scripts {scripts} (pages have no JavaScript but {PASSKEY_SCRIPT}, loaded by its nonce)",
        )
        if shots and self.shots:
            for scheme in ("light", "dark"):
                self.color_scheme(scheme)
                self.screenshot(os.path.join(self.shots, f"{page}-{scheme}.png"))
        for scheme in ("light", "dark"):
            self.color_scheme(scheme)
            self.axe(page, scheme)
        self.color_scheme("light")
        self.focus_walk(page)

    def color_scheme(self, scheme):
        value = "dark" if scheme == "dark" else "light"
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": value}]}
        )
        dark = self.driver.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches")
        self.check(dark == (scheme == "dark"), f"could not emulate prefers-color-scheme: {scheme}")

    def section_shots(self, selector, name):
        """NAME-light.png and NAME-dark.png of one part of the page (`selector`, with a little margin)."""
        if not self.shots:
            return
        element = self.one(selector)
        self.driver.execute_script("if (document.activeElement) document.activeElement.blur(); scrollTo(0, 0)")
        for scheme in ("light", "dark"):
            self.color_scheme(scheme)
            box = self.driver.execute_script(
                "const r = arguments[0].getBoundingClientRect();"
                "return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height};",
                element,
            )
            margin = 12
            clip = {
                "x": max(box["x"] - margin, 0), "y": max(box["y"] - margin, 0),
                "width": box["width"] + 2 * margin, "height": box["height"] + 2 * margin, "scale": 1,
            }
            self.screenshot(os.path.join(self.shots, f"{name}-{scheme}.png"), clip)
        self.color_scheme("light")

    def screenshot(self, path, clip=None):
        """The whole page at the window's width (at least one screen tall), or the `clip` rectangle of it."""
        import base64

        if clip is None:
            metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
            width = metrics["cssLayoutViewport"]["clientWidth"]
            height = max(metrics["cssContentSize"]["height"], metrics["cssLayoutViewport"]["clientHeight"])
            clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(base64.b64decode(shot["data"]))

    def axe(self, page, scheme):
        axe = Axe(self.driver, script_url=AXE_CORE)
        axe.inject()
        version = self.driver.execute_script("return axe.version")
        self.check(version.startswith("4."), f"page {page}: axe-core {version} ran, not the 4.x given")
        results = axe.run()
        # Any impact, not only serious and critical: the pages have none, and a minor one should not creep in.
        violations = results["violations"]
        if violations:
            print(f"axe, page {page} ({scheme}):\n" + axe.report(violations))
        self.check(
            not violations,
            f"page {page} ({scheme}): axe reports {len(violations)} violation(s): "
            + ", ".join(f"{v['id']} ({v['impact']})" for v in violations),
        )

    def focus_walk(self, page):
        """TAB through the page: every visible focusable control is reached, and each shows a focus indicator
        (an outline or a box shadow while focused)."""
        c = self.check
        d = self.driver
        controls = [e for e in self.css(FOCUSABLE) if e.is_displayed()]
        if not controls:
            return
        d.execute_script("if (document.activeElement) document.activeElement.blur(); window.scrollTo(0, 0)")
        reached = {}
        for _ in range(2 * len(controls) + 6):
            ActionChains(d).send_keys(Keys.TAB).perform()
            state = d.execute_script(
                """
                const e = document.activeElement;
                if (!e || e === document.body) return null;
                const s = getComputedStyle(e);
                const outline = s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0;
                const shadow = s.boxShadow && s.boxShadow !== 'none';
                const name = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                    + (e.getAttribute('name') ? '[name=' + e.getAttribute('name') + ']' : '');
                return {element: e, visible: outline || shadow, name: name,
                        style: s.outlineStyle + ' ' + s.outlineWidth + ' / ' + s.boxShadow};
                """
            )
            if state is None:
                continue
            key = state["element"].id
            if key in reached:
                if len(reached) == len(controls):
                    break
                continue
            reached[key] = state
            c(
                state["visible"],
                f"page {page}: {state['name']} shows no focus indicator when focused by TAB ({state['style']})",
            )
        missing = [
            e.tag_name + ("#" + e.get_attribute("id") if e.get_attribute("id") else "")
            for e in controls
            if e.id not in reached
        ]
        c(not missing, f"page {page}: not reachable with TAB: {', '.join(missing)}")
        d.execute_script("if (document.activeElement) document.activeElement.blur(); window.scrollTo(0, 0)")


# --- running the tests -------------------------------------------------------------------------------------------


def run(tests, server, shots):
    """Runs each test in its own browser; prints a line per test and the summary. Returns the exit status."""
    check = Checks()
    failed = []
    for test in tests:
        name = test.__name__.removeprefix("test_")
        start = time.monotonic()
        browser = None
        try:
            browser = Browser(server, check, shots)
            test(server, browser, check)
            if browser.failures:
                raise CheckFailed("; ".join(browser.failures))
            print(f"ok    {name} ({time.monotonic() - start:.1f}s)", flush=True)
        except CheckFailed as failure:
            failed.append(name)
            print(f"FAIL  {name}: {failure}", flush=True)
        except Exception:
            failed.append(name)
            print(f"ERROR {name}:\n{traceback.format_exc()}", flush=True)
        finally:
            if browser:
                browser.close()
    bad = sorted(page for page, failure in check.pages.items() if failure)
    summary = f"browser: {len(check.pages)} pages, {check.passed} checks passed"
    if bad:
        summary += f"; pages failed: {', '.join(bad)}"
    if failed:
        summary += f"; {len(failed)} of {len(tests)} tests failed: {', '.join(failed)}"
    else:
        summary += f"; all {len(tests)} tests passed"
    print(summary)
    return 1 if failed else 0
