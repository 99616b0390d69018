"""Every web page of Gatehouse in headless Chromium, against the real binary (started by scripts/browser-test.sh).

Each test follows one person's path through the pages: it renders, its forms work end to end, it can be used with
the keyboard alone, axe-core 4.9 finds no violation of any impact in light or dark, and every control shows where the
focus is. Screenshots of each page in light and dark go to docs/pages/.

Usage: python3 Tests/browser/pages.py --base URL --data-dir DIR --binary PATH [--shots DIR] [test names...]
"""

import argparse
import io
import re
import signal
import sys
import time
import urllib.parse

import pyotp
import zxingcpp
from harness import WAIT, CheckFailed, Server, run
from PIL import Image
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

PASSWORD = "correct horse battery staple"
NEW_PASSWORD = "a brand new pass phrase 42"


def link_parts(link):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    return {name: values[0] for name, values in query.items()}


def confirmed_link(server, check, who):
    """A confirmed account and a fresh sign-in mail for it."""
    email = f"{who}@example.com"
    server.sign_up(check, email, PASSWORD)
    mail = server.magic_link(check, email)
    check(mail.link is not None, f"the sign-in mail to {email} has no /auth/v1/verify link: {mail.text!r}")
    check(mail.code is not None, f"the sign-in mail to {email} has no 6-digit code: {mail.text!r}")
    return email, mail


def ask_for_new_link(server, browser, check, email):
    """The used and expired pages' form: a new link, mailed."""
    browser.one("form#new-link")
    browser.type_into("form#new-link input#email", email)
    browser.press_on("form#new-link [type=submit]", "link-sent")
    browser.audit("link-sent")
    mail = server.outbox.next(email)
    check(mail.link is not None, f"the new-link mail to {email} has no link: {mail.text!r}")


def sign_in_with_password(browser, email, password, page="account"):
    """The sign-in page's password form, by keyboard."""
    browser.open("/account/sign-in", "sign-in")
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", password)
    browser.press_on("form#password-sign-in [type=submit]", page)


# --- 1. the magic link ---------------------------------------------------------------------------------------------


def test_magic_link(server, browser, check):
    """The mailed link opens a page showing the code; Continue signs this browser in."""
    email, mail = confirmed_link(server, check, "link")
    browser.open(mail.link, "link").audit("link")
    check.equal(browser.text("#code").replace(" ", ""), mail.code, "the link page's #code")
    browser.one("form#continue")
    browser.press_on("form#continue [type=submit]", "confirmed").audit("confirmed")
    href = browser.one("a#account-link").get_attribute("href")
    check(urllib.parse.urlsplit(href).path == "/account", f"a#account-link goes to {href}, not /account")
    browser.press_on("a#account-link", "account")
    check(email in browser.driver.page_source, f"the account page after the link does not show {email}")
    browser.open(mail.link, "used")


def test_used_link(server, browser, check):
    """A spent link says so, and its form mails a new one."""
    _, mail = confirmed_link(server, check, "used")
    parts = link_parts(mail.link)
    status, answer = server.api("POST", "/auth/v1/verify", {"type": parts.get("type", "magiclink"),
                                                            "token_hash": parts.get("token")})
    check(status == 200, f"spending the link through the API answered {status}: {answer}")
    browser.open(mail.link, "used").audit("used")
    other = "used-again@example.com"
    server.sign_up(check, other, PASSWORD)
    ask_for_new_link(server, browser, check, other)


def test_expired_link(server, browser, check):
    """An unknown or expired link says so, and its form mails a new one."""
    browser.open("/auth/v1/verify?token=0123456789abcdef0123456789abcdef&type=magiclink", "expired")
    browser.audit("expired")
    other = "expired@example.com"
    server.sign_up(check, other, PASSWORD)
    ask_for_new_link(server, browser, check, other)


def test_mail_scanner(server, browser, check):
    """A scanner's GET and HEAD spend nothing: the person's tap still signs in."""
    _, mail = confirmed_link(server, check, "scanner")
    status, _, body = server.request("GET", mail.link, headers={"User-Agent": "MailScanner/1.0"})
    check(status == 200, f"a scanner's GET of the link answered {status}")
    check('data-page="link"' in body, "a scanner's GET of the link did not get the link page")
    status, _, _ = server.request("HEAD", mail.link, headers={"User-Agent": "MailScanner/1.0"})
    check(status in (200, 405), f"a scanner's HEAD of the link answered {status}")
    status, _, _ = server.request("GET", mail.link, headers={"User-Agent": "MailScanner/1.0"})
    check(status == 200, f"a scanner's second GET of the link answered {status}")
    browser.open(mail.link, "link")
    check.equal(browser.text("#code").replace(" ", ""), mail.code, "the link page's #code after the scanner")
    browser.press_on("form#continue [type=submit]", "confirmed")


# --- 2. password reset ---------------------------------------------------------------------------------------------


def test_password_reset(server, browser, check):
    """A recovery link leads to the password page; a weak password is refused with reasons, a strong one set."""
    email = "reset@example.com"
    server.sign_up(check, email, PASSWORD)
    status, answer = server.api("POST", "/auth/v1/recover", {"email": email})
    check(status == 200, f"recover answered {status}: {answer}")
    mail = server.outbox.next(email)
    check(mail.link is not None, f"the recovery mail has no link: {mail.text!r}")
    browser.open(mail.link, "link")
    browser.press_on("form#continue [type=submit]", "password")
    check(urllib.parse.urlsplit(browser.driver.current_url).path == "/account/password",
          f"recovery continued to {browser.driver.current_url}, not /account/password")
    browser.audit("password")
    check(not browser.css("input#current-password"), "after a recovery link the password page asks the current one")
    browser.one("form#password-form")
    browser.type_into("form#password-form input#password", "password")
    browser.press_on("form#password-form [type=submit]", "password")
    error = browser.text("#password-error")
    check(bool(error), "a weak password shows an empty #password-error")
    described = (browser.one("input#password").get_attribute("aria-describedby") or "").split()
    error_id = browser.one("#password-error").get_attribute("id")
    check(error_id in described, f"input#password aria-describedby={described} does not name #password-error")
    browser.audit("password", shots=False)
    browser.type_into("form#password-form input#password", NEW_PASSWORD)
    browser.press_on("form#password-form [type=submit]", "account")
    check(bool(browser.text("#notice")), "the account page after a new password has an empty #notice")
    status, answer = server.password_grant(email, NEW_PASSWORD)
    check(status == 200, f"sign-in with the new password answered {status}: {answer}")
    status, _ = server.password_grant(email, PASSWORD)
    check(status == 400, f"sign-in with the old password answered {status}")


# --- 3. the share landing ------------------------------------------------------------------------------------------


def test_share(server, browser, check):
    """A share link shows the company, who invites, the permission and expiry, and nothing of the members."""
    email = "owner@example.com"
    account = server.sign_up(check, email, PASSWORD, first_name="Ada")["access_token"]
    status, company = server.api("POST", "/v1/companies", {"name": "Acme Browser Ltd"}, token=account)
    check(status in (200, 201), f"creating a company answered {status}: {company}")
    cid = company["id"]
    result = server.cli("companies", "set-tier", cid, "business")
    check(result.returncode == 0, f"companies set-tier failed: {result.stderr}")
    credential = {"username": "ada-owner", "password": "a long company password"}
    status, answer = server.api("PUT", f"/v1/companies/{cid}/credential", credential, token=account)
    check(status in (200, 201, 204), f"credential PUT answered {status}: {answer}")
    status, login = server.api("POST", f"/v1/companies/{cid}/login", credential, token=account)
    check(status == 200, f"company login answered {status}: {login}")
    company_token = login["access_token"]
    status, share = server.api(
        "POST", f"/v1/companies/{cid}/shares", {"permission": "read_write", "expires_in": 86400}, token=company_token
    )
    check(status == 201, f"creating a share answered {status}: {share}")
    token = share["token"]
    status, preview = server.api("GET", f"/v1/shares/{token}", token=account)
    check(status == 200, f"the share preview answered {status}: {preview}")

    browser.open(f"/share/{token}", "share").audit("share")
    check.equal(browser.text("#company-name"), "Acme Browser Ltd", "#company-name")
    check(preview["inviter_name"] in browser.text("#inviter"),
          f"#inviter {browser.text('#inviter')!r} does not name {preview['inviter_name']!r}")
    check(bool(browser.text("#permission")), "#permission is empty")
    check(bool(browser.text("#expiry")), "#expiry is empty")
    # scripts/browser-test.sh starts the server with --app-url and --app-store-url.
    opens = [link.get_attribute("href") for link in browser.css("a#open-in-app")]
    check.equal(opens, [f"gatehouse-example://share/{token}"], "a#open-in-app's href")
    check(len(browser.css("#get-the-app a")) == 1, "#get-the-app has no link to get the app")
    page = browser.driver.page_source
    check(email not in page and "ada-owner" not in page, "the share page shows a member's email or username")
    if browser.css("a#open-in-app"):
        browser.tab_to("a#open-in-app")
    check.equal(share.get("url"), f"{server.base}/share/{token}", "the url field of createShare")

    status, _ = server.api("DELETE", f"/v1/companies/{cid}/shares/{share['id']}", token=company_token)
    check(status == 204, f"revoking the share answered {status}")
    browser.open(f"/share/{token}", "share-unavailable").audit("share-unavailable")
    check("Acme Browser Ltd" not in browser.driver.page_source, "a revoked link still names the company")


# --- 4. web sign-in ------------------------------------------------------------------------------------------------


def test_sign_in(server, browser, check):
    """Without the cookie /account goes to sign-in; by password, then by a mailed code, to the account page."""
    email = "signin@example.com"
    server.sign_up(check, email, PASSWORD)
    status, headers, _ = server.request("GET", "/account", follow=False)
    location = headers.get("Location") or headers.get("location") or ""
    check(status == 303 and urllib.parse.urlsplit(location).path == "/account/sign-in",
          f"/account without a session answered {status} to {location!r}, not 303 to /account/sign-in")
    browser.open("/account", "sign-in").audit("sign-in")
    browser.one("form#password-sign-in")
    browser.one("form#code-sign-in")
    sign_in_with_password(browser, email, PASSWORD)
    check(email in browser.driver.page_source, f"the account page does not show {email}")
    cookies = browser.driver.get_cookies()
    check(cookies and all(c.get("httpOnly") for c in cookies), f"the web session cookie is not HttpOnly: {cookies}")
    browser.press_on("form#sign-out [type=submit]", None)
    browser.open("/account", "sign-in")

    browser.type_into("form#code-sign-in input#code-email", email)
    browser.press_on("form#code-sign-in [type=submit]", "enter-code").audit("enter-code")
    mail = server.outbox.next(email)
    check(mail.code is not None, f"the sign-in code mail has no code: {mail.text!r}")
    browser.one("form#code-form")
    browser.type_into("form#code-form input#code", mail.code)
    browser.press_on("form#code-form [type=submit]", "account")
    check(email in browser.driver.page_source, f"the account page after a code does not show {email}")


# --- 5. the account page -------------------------------------------------------------------------------------------


def test_account(server, browser, check):
    """Sessions listed, the others signed out, the password changed with the current one."""
    email = "account@example.com"
    server.sign_up(check, email, PASSWORD)
    status, other = server.password_grant(email, PASSWORD)
    check(status == 200, f"an app's sign-in answered {status}: {other}")
    sign_in_with_password(browser, email, PASSWORD)
    browser.audit("account")
    rows = browser.css("table#sessions tr.session")
    check(len(rows) >= 3, f"table#sessions lists {len(rows)} sessions, expected the sign-up's, the app's and this one")
    current = browser.css("table#sessions tr.session.current")
    check(len(current) == 1, f"{len(current)} rows of table#sessions are marked current")

    browser.press_on("form#sign-out-others [type=submit]", "account")
    rows = browser.css("table#sessions tr.session")
    check(len(rows) == 1 and "current" in (rows[0].get_attribute("class") or ""),
          f"after signing out the others, table#sessions lists {len(rows)} sessions")
    status, _ = server.api("GET", "/auth/v1/user", token=other["access_token"])
    check(status in (401, 403), f"the app's session still works after 'sign out others' ({status})")

    href = browser.one("a#change-password").get_attribute("href")
    check(urllib.parse.urlsplit(href).path == "/account/password", f"a#change-password goes to {href}")
    browser.press_on("a#change-password", "password")
    browser.one("input#current-password")
    browser.type_into("form#password-form input#current-password", "not my password")
    browser.type_into("form#password-form input#password", NEW_PASSWORD)
    browser.press_on("form#password-form [type=submit]", "password")
    status, _ = server.password_grant(email, NEW_PASSWORD)
    check(status == 400, f"a wrong current password still changed the password ({status})")
    browser.type_into("form#password-form input#current-password", PASSWORD)
    browser.type_into("form#password-form input#password", NEW_PASSWORD)
    browser.press_on("form#password-form [type=submit]", "account")
    check(bool(browser.text("#notice")), "the account page after a password change has an empty #notice")
    status, answer = server.password_grant(email, NEW_PASSWORD)
    check(status == 200, f"sign-in with the changed password answered {status}: {answer}")


def test_delete_refused_owner(server, browser, check):
    """An account that owns a company cannot be deleted; the page names the company."""
    email = "owner-delete@example.com"
    account = server.sign_up(check, email, PASSWORD)["access_token"]
    status, company = server.api("POST", "/v1/companies", {"name": "Owned Browser Co"}, token=account)
    check(status in (200, 201), f"creating a company answered {status}: {company}")
    sign_in_with_password(browser, email, PASSWORD)
    delete_by_keyboard(browser, PASSWORD, "account")
    error = browser.one("#delete-error")
    owned = [li.text for li in error.find_elements("css selector", "li.owned-company")]
    check(any("Owned Browser Co" in name for name in owned), f"#delete-error lists {owned}, not the company")
    browser.audit("account", shots=False)
    status, answer = server.password_grant(email, PASSWORD)
    check(status == 200, f"the owner's account is gone after a refused deletion ({status}: {answer})")


def delete_by_keyboard(browser, password, page):
    browser.one("form#delete")
    browser.type_into("form#delete input#delete-password", password)
    browser.tab_to("form#delete input#delete-confirm")
    ActionChains(browser.driver).send_keys(Keys.SPACE).perform()
    checked = browser.one("input#delete-confirm").is_selected()
    browser.check(checked, "SPACE on input#delete-confirm did not tick it")
    browser.press_on("form#delete [type=submit]", page)


def account_without_sign_up_mail(server, check, email, password):
    """A confirmed account with a password that no sign-up mail made: a sign-in code creates it, a recovery code
    lets it set a password. Signing up again after deleting it is then not held by the 60 s resend cooldown of
    sign-up mails (per address, whether or not it has an account), which a test must not wait out."""
    status, answer = server.api("POST", "/auth/v1/otp", {"email": email, "create_user": True})
    check(status == 200, f"otp creating {email} answered {status}: {answer}")
    server.verify_code(check, email, server.outbox.next(email).code, "email")
    status, answer = server.api("POST", "/auth/v1/recover", {"email": email})
    check(status == 200, f"recover of {email} answered {status}: {answer}")
    session = server.verify_code(check, email, server.outbox.next(email).code, "recovery")
    status, answer = server.api("PUT", "/auth/v1/user", {"password": password}, token=session["access_token"])
    check(status == 200, f"setting {email}'s password answered {status}: {answer}")


def test_delete_account(server, browser, check):
    """Deleting the account in the browser: the password stops working, and the email may sign up afresh."""
    email = "deleted@example.com"
    account_without_sign_up_mail(server, check, email, PASSWORD)
    sign_in_with_password(browser, email, PASSWORD)
    delete_by_keyboard(browser, PASSWORD, "deleted")
    browser.audit("deleted")
    status, answer = server.password_grant(email, PASSWORD)
    code = (answer or {}).get("error_code")
    check(status == 400 and code == "invalid_credentials",
          f"sign-in to the deleted account answered {status}: {answer}")
    browser.open("/account", "sign-in")
    status, answer = server.api("POST", "/auth/v1/signup", {"email": email, "password": NEW_PASSWORD})
    check(status == 200, f"signing up again with the deleted account's email answered {status}: {answer}")
    server.verify_code(check, email, server.outbox.next(email).code, "signup")
    status, answer = server.password_grant(email, NEW_PASSWORD)
    check(status == 200, f"the new account's password sign-in answered {status}: {answer}")


# --- 6. two-step verification --------------------------------------------------------------------------------------


class Authenticator:
    """A phone's authenticator app, set up from a scanned otpauth:// URI. The server takes each 30 s step's code
    once: a step already used gives way to the next one's code, which it also accepts."""

    def __init__(self, uri):
        self.totp = pyotp.parse_uri(uri)
        self.used = set()

    def code(self):
        now = time.time()
        step = int(now // self.totp.interval)
        if step in self.used:
            step += 1
            now += self.totp.interval
        self.used.add(step)
        return self.totp.at(now)

    def wrong_code(self):
        """Six digits no step near now gives."""
        now = time.time()
        near = {self.totp.at(now + offset * self.totp.interval) for offset in range(-2, 3)}
        return next(code for code in ("000000", "111111", "222222") if code not in near)


def scan_qr_code(browser, check):
    """Photographs figure#qr-code as a phone would and decodes it: the one otpauth://totp/ URI it holds."""
    figure = browser.one("figure#qr-code")
    check(len(figure.find_elements("css selector", "svg")) == 1, "figure#qr-code holds no inline <svg>")
    browser.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", figure)
    png = figure.screenshot_as_png
    found = zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))
    size = figure.size
    check(len(found) == 1, f"figure#qr-code ({size['width']}x{size['height']} px) decodes to {len(found)} codes")
    check(found[0].format == zxingcpp.BarcodeFormat.QRCode, f"figure#qr-code decodes as {found[0].format}")
    text = found[0].text
    check(text.startswith("otpauth://totp/"), f"the QR code holds {text!r}, not an otpauth://totp/ URI")
    return text


def test_second_factor(server, browser, check):
    """An authenticator app set up from the scanned QR code, its recovery codes, a sign-in that asks for a code
    (a recovery code once, the app's code once, a wrong one refused), and the app removed."""
    email = "two-step@example.com"
    server.sign_up(check, email, PASSWORD)
    sign_in_with_password(browser, email, PASSWORD)
    check(not browser.css("ul#factors li.factor"), "a new account lists a factor")
    browser.one("form#add-factor")
    browser.press_on("form#add-factor [type=submit]", "factor-setup").audit("factor-setup")

    shown = browser.text("code#secret")
    check(re.fullmatch(r"[A-Z2-7]{1,4}(-[A-Z2-7]{1,4})+", shown), f"code#secret {shown!r} is not base32 in groups")
    secret = shown.replace("-", "")
    uri = scan_qr_code(browser, check)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    check.equal(query.get("secret", [None])[0], secret, "the scanned QR code's secret= against code#secret")
    app = Authenticator(uri)
    check.equal(app.totp.secret, secret, "pyotp's secret from the scanned URI")

    browser.one("form#factor-form")
    browser.type_into("form#factor-form input#code", app.wrong_code())
    browser.press_on("form#factor-form [type=submit]", "factor-setup")
    check(bool(browser.text("p#code-error")), "a wrong code shows an empty p#code-error")
    described = (browser.one("input#code").get_attribute("aria-describedby") or "").split()
    check("code-error" in described, f"input#code aria-describedby={described} does not name p#code-error")
    check.equal(browser.text("code#secret"), shown, "code#secret after a wrong code")
    browser.audit("factor-setup", shots=False)

    browser.type_into("form#factor-form input#code", app.code())
    browser.press_on("form#factor-form [type=submit]", "recovery-codes").audit("recovery-codes")
    codes = [element.text.strip() for element in browser.css("ul#recovery-codes code.recovery-code")]
    check.equal(len(codes), 10, "the number of code.recovery-code in ul#recovery-codes")
    check(all(re.fullmatch(r"[A-Za-z0-9]{4}(-[A-Za-z0-9]{4}){3}", code) for code in codes),
          f"the recovery codes are not 16 characters in groups of 4: {codes}")
    check.equal(len(set(codes)), 10, "the number of distinct recovery codes")
    href = browser.one("a#continue").get_attribute("href")
    check(urllib.parse.urlsplit(href).path == "/account", f"a#continue goes to {href}, not /account")
    browser.press_on("a#continue", "account")
    check(bool(browser.text("#notice")), "the account page after turning the app on has an empty #notice")
    on = [li.text for li in browser.css("ul#factors li.factor") if " On" in li.text]
    check(len(on) >= 1, f"ul#factors shows no factor On: {[li.text for li in browser.css('ul#factors li.factor')]}")
    browser.audit("account", shots=False)

    # A sign-in now asks for a code: a wrong one, then a recovery code (with its dashes).
    browser.press_on("form#sign-out [type=submit]", None)
    sign_in_with_password(browser, email, PASSWORD, page="second-factor")
    check(urllib.parse.urlsplit(browser.driver.current_url).path == "/account/second-factor",
          f"the password sign-in went to {browser.driver.current_url}, not /account/second-factor")
    browser.audit("second-factor")
    browser.open("/account", "second-factor")
    browser.one("form#second-factor-form")
    browser.type_into("form#second-factor-form input#code", app.wrong_code())
    browser.press_on("form#second-factor-form [type=submit]", "second-factor")
    check(bool(browser.text("p#code-error")), "a wrong code shows an empty p#code-error")
    described = (browser.one("input#code").get_attribute("aria-describedby") or "").split()
    check("code-error" in described, f"input#code aria-describedby={described} does not name p#code-error")
    browser.audit("second-factor", shots=False)
    browser.type_into("form#second-factor-form input#code", codes[0])
    browser.press_on("form#second-factor-form [type=submit]", "account")
    check(email in browser.driver.page_source, f"the account page after a recovery code does not show {email}")

    # The same recovery code is spent; the app's code signs in.
    browser.press_on("form#sign-out [type=submit]", None)
    sign_in_with_password(browser, email, PASSWORD, page="second-factor")
    browser.type_into("form#second-factor-form input#code", codes[0])
    browser.press_on("form#second-factor-form [type=submit]", "second-factor")
    check(bool(browser.text("p#code-error")), "a spent recovery code shows an empty p#code-error")
    browser.type_into("form#second-factor-form input#code", app.code())
    browser.press_on("form#second-factor-form [type=submit]", "account")

    # This session gave a code: the app can be removed.
    apps = [li for li in browser.css("ul#factors li.factor") if li.text.startswith("Authenticator app")]
    check.equal(len(apps), 1, "the authenticator apps in ul#factors")
    factor_id = apps[0].find_element("css selector", "form.remove-factor input[name=factor_id]").get_attribute("value")
    browser.press_on(f"form.remove-factor:has(input[value='{factor_id}']) [type=submit]", "account")
    notice = browser.text("#notice") if browser.css("#notice") else ""
    remaining = [li.text for li in browser.css("ul#factors li.factor")]
    check(factor_id not in browser.driver.page_source and not any(li.startswith("Authenticator app") for li in remaining),
          f"removing the app from an aal2 session left it listed: {remaining}; #notice {notice!r}")
    check(bool(notice), "the account page after removing the app has an empty #notice")
    browser.press_on("form#sign-out [type=submit]", None)
    sign_in_with_password(browser, email, PASSWORD)


# --- 7. passkeys ----------------------------------------------------------------------------------------------------


def wait_for_text(browser, selector):
    """The text `selector` shows once the page's script has put one there."""
    try:
        WebDriverWait(browser.driver, WAIT).until(
            lambda d: d.execute_script(
                "const e = document.querySelector(arguments[0]); return !!e && e.textContent.trim() !== ''", selector
            )
        )
    except TimeoutException:
        raise CheckFailed(f"{selector} stayed empty for {WAIT}s; {browser.describe()}")
    return browser.text(selector)


def test_passkeys(server, browser, check):
    """A passkey added on the account page (a virtual authenticator), the same one again refused in words, renamed;
    signed out, the sign-in page's autofill signs in, then its button (a refused check said in words first); the
    passkey removed, and its copy in the authenticator no longer signs in."""
    email = "passkey@example.com"
    server.sign_up(check, email, PASSWORD)
    browser.add_passkey_authenticator()
    sign_in_with_password(browser, email, PASSWORD)
    browser.one("section#passkeys")
    check(not browser.css("li.passkey"), "a new account lists a passkey")
    check(browser.one("#add-passkey").is_displayed(), "#add-passkey is not shown (did the script run?)")
    unsupported = browser.one("#passkey-unsupported").is_displayed()
    check(not unsupported, "#passkey-unsupported shows in a browser with passkeys")

    browser.press_on("#add-passkey", "account")
    check("passkey is added" in browser.text("#notice"), f"#notice after adding: {browser.text('#notice')!r}")
    rows = browser.css("li.passkey")
    check.equal(len(rows), 1, "the li.passkey after adding one")
    check("not used yet" in rows[0].text, f"a new passkey's row says {rows[0].text!r}")
    credentials = browser.driver.get_credentials()
    check.equal(len(credentials), 1, "the virtual authenticator's credentials")
    check.equal(credentials[0].rp_id, "localhost", "the new passkey's relying party")
    check(credentials[0].is_resident_credential, "the new passkey is not discoverable")

    # The same authenticator again: it holds the passkey already (excludeCredentials), and the page says so.
    browser.tab_to("#add-passkey")
    ActionChains(browser.driver).send_keys(Keys.ENTER).perform()
    error = wait_for_text(browser, "#passkey-error")
    check.equal(error, "This passkey is already registered.", "#passkey-error after adding the same passkey")

    # Renamed with the row's form.
    browser.tab_to("details.rename-passkey summary")
    ActionChains(browser.driver).send_keys(Keys.ENTER).perform()
    browser.type_into("details.rename-passkey input[name=friendly_name]", "Test laptop")
    browser.press_on("details.rename-passkey [type=submit]", "account")
    check.equal(browser.text("li.passkey .passkey-name"), "Test laptop", "the passkey's name after renaming")
    browser.audit("account", shots=False)

    # Signed out, the sign-in page asks for the browser's passkeys at once (autofill, conditional mediation): the
    # virtual authenticator answers it as a person picking the passkey would, and the account page opens.
    browser.press_on("form#sign-out [type=submit]", None)
    try:
        WebDriverWait(browser.driver, WAIT).until(lambda d: browser.page_name() == "account")
    except TimeoutException:
        raise CheckFailed(f"the sign-in page's autofill request did not sign in; {browser.describe()}")
    rows = browser.css("li.passkey")
    check(len(rows) == 1 and "last used" in rows[0].text, f"after signing in with it the row says {rows[0].text!r}")

    # An autofill request that finds no passkey (the authenticator held none when the page asked) says nothing: no
    # one pressed anything. The button then signs in.
    held = browser.driver.get_credentials()
    browser.driver.remove_all_credentials()
    browser.press_on("form#sign-out [type=submit]", "sign-in")
    check.equal(browser.text("#passkey-error"), "", "#passkey-error after an autofill request that found no passkey")
    # Read before the passkey is back: the autofill request, still waiting, may find it at once and sign in by
    # itself (on a loaded machine it did, and the page went away under the read). If it has not, the button does.
    browser.driver.add_credential(held[0])
    if browser.page_name() != "account":
        try:
            browser.press_on("#passkey-button", "account")
        except (StaleElementReferenceException, CheckFailed):
            # The autofill request signed in while the button was being reached: the outcome is the same.
            browser.expect("account")

    # Without autofill, the button: a refused check says so in words, then it signs in.
    browser.without_passkey_autofill()
    browser.driver.set_user_verified(False)
    browser.press_on("form#sign-out [type=submit]", "sign-in")
    check(browser.one("#passkey-button").is_displayed(), "#passkey-button is not shown on the sign-in page")
    autocomplete = browser.one("input#email").get_attribute("autocomplete")
    check.equal(autocomplete, "username webauthn", "input#email's autocomplete")
    browser.tab_to("#passkey-button")
    ActionChains(browser.driver).send_keys(Keys.ENTER).perform()
    check.equal(wait_for_text(browser, "#passkey-error"), "Cancelled.", "#passkey-error after a refused check")
    browser.driver.set_user_verified(True)
    browser.press_on("#passkey-button", "account")
    check(email in browser.driver.page_source, f"the account page after the passkey does not show {email}")
    browser.audit("account", shots=False)
    browser.section_shots("section#passkeys", "account-passkeys")

    # Removed: gone from the page, and the authenticator's copy no longer signs in.
    browser.press_on("form.remove-passkey [type=submit]", "account")
    check("passkey is removed" in browser.text("#notice"), f"#notice after removing: {browser.text('#notice')!r}")
    check(not browser.css("li.passkey"), "the passkey is still listed after removing it")
    _, app = server.password_grant(email, PASSWORD)
    status, passkeys = server.api("GET", "/auth/v1/passkeys", token=app["access_token"])
    check(status == 200 and passkeys == [], f"the API lists {passkeys} ({status}) after removing the passkey")
    browser.press_on("form#sign-out [type=submit]", "sign-in")
    browser.tab_to("#passkey-button")
    ActionChains(browser.driver).send_keys(Keys.ENTER).perform()
    error = wait_for_text(browser, "#passkey-error")
    check(error.startswith("This passkey is not registered here"), f"#passkey-error with a removed passkey: {error!r}")
    check.equal(browser.page_name(), "sign-in", "the page after a removed passkey")


TESTS = [
    test_magic_link,
    test_used_link,
    test_expired_link,
    test_mail_scanner,
    test_password_reset,
    test_share,
    test_sign_in,
    test_account,
    test_delete_refused_owner,
    test_delete_account,
    test_second_factor,
    test_passkeys,
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--shots", default=None)
    parser.add_argument("only", nargs="*", help="test names to run (default: all)")
    args = parser.parse_args()
    # A TERM ends the run through the tests' `finally`, which quits each browser.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = Server(args.base, args.data_dir, args.binary)
    tests = [t for t in TESTS if not args.only or t.__name__.removeprefix("test_") in args.only]
    sys.exit(run(tests, server, args.shots))


if __name__ == "__main__":
    main()
