"""Every web page of Gatehouse in headless Chromium, against the real binary (started by scripts/browser-test.sh).

Each test follows one person's path through the pages: it renders, its forms work end to end, it can be used with
the keyboard alone, axe-core 4.9 finds no violation of any impact in light or dark, and every control shows where the
focus is. Screenshots of each page in light and dark go to docs/pages/.

Usage: python3 Tests/browser/pages.py --base URL --data-dir DIR --binary PATH [--shots DIR] [test names...]
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

import pyotp
import zxingcpp
from authlib.jose import JsonWebKey
from authlib.jose import jwt as jose_jwt
from harness import WAIT, CheckFailed, Server, run
from PIL import Image
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROVIDER = os.path.join(ROOT, "Tests", "oidc", "provider.py")
SAML_IDP = os.path.join(ROOT, "Tests", "saml", "idp.py")
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


# --- 8. upstream providers ------------------------------------------------------------------------------------------


class Upstream:
    """Tests/oidc/provider.py (Authlib's OpenID provider, on Flask) in a process of its own, registered with the
    server through the admin API as `custom:acme` ("Acme"), its client's redirect URI the server's callback. For one
    test, as a context manager: on leaving, the registration is removed and the process stopped."""

    IDENTIFIER = "custom:acme"
    NAME = "Acme"

    def __init__(self, server, check):
        self.server = server
        self.check = check
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        self.process = None
        self.service_key = None

    def __enter__(self):
        try:
            self._start()
            self._register()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_):
        try:
            if self.service_key:
                self._admin(self.service_key, "DELETE", f"/auth/v1/admin/custom-providers/{self.IDENTIFIER}")
        finally:
            if self.process and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=WAIT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.log.close()

    def printed(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace").strip()[-2000:]

    def _start(self):
        """Starts the provider and polls, up to WAIT seconds, until its discovery document answers."""
        self.process = subprocess.Popen(
            [sys.executable, PROVIDER, "--port", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT
        )
        end = time.monotonic() + WAIT
        while True:
            if self.process.poll() is not None:
                raise CheckFailed(f"the provider exited with {self.process.returncode}: {self.printed()}")
            try:
                status, _, _ = self.server.request("GET", self.issuer + "/.well-known/openid-configuration")
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > end:
                raise CheckFailed(f"the provider did not answer at {self.issuer} within {WAIT}s: {self.printed()}")
            time.sleep(0.05)  # polling interval, not a wait for state

    def _admin(self, key, method, path, body=None):
        """(status, text) of an admin API call made with the service key `key`, as a backend makes one."""
        status, _, text = self.server.request(method, path, body=body, token=key, headers={"apikey": key})
        return status, text

    def _register(self):
        c = self.check
        callback = self.server.base + "/auth/v1/callback"
        secret = secrets.token_hex(16)
        client = {"client_id": "gatehouse", "client_secret": secret, "redirect_uris": [callback],
                  "token_endpoint_auth_method": "client_secret_basic"}
        status, _, text = self.server.request("POST", self.issuer + "/admin/clients", body=client)
        c(status == 201, f"the provider refused the client: {status} {text}")
        # A service key names the server's public URL as its issuer, as an operator mints one.
        minted = self.server.cli("keys", "service-key", "--public-url", self.server.base)
        key = minted.stdout.strip()
        c(minted.returncode == 0 and key and "\n" not in key,
          f"`gatehouse keys service-key` exited with {minted.returncode}: {minted.stderr.strip()!r}")
        registration = {
            "provider_type": "oidc", "identifier": self.IDENTIFIER, "name": self.NAME, "client_id": "gatehouse",
            "client_secret": secret, "issuer": self.issuer, "scopes": ["email", "profile"], "pkce_enabled": True,
        }
        status, text = self._admin(key, "POST", "/auth/v1/admin/custom-providers", registration)
        c(status == 201, f"registering {self.IDENTIFIER} answered {status}: {text}")
        self.service_key = key  # registered: removed on leaving

    # the provider's sign-in page --------------------------------------------------------------------------------

    def on_page(self, browser):
        """The browser shows the provider's sign-in form."""
        browser.expect(None)
        url = browser.driver.current_url
        self.check(url.startswith(self.issuer + "/authorize") and browser.css("form button#approve"),
                   f"expected the provider's sign-in page at {self.issuer}/authorize; {browser.describe()}")

    def fill_in(self, browser, email, sub, name="Ada Lovelace"):
        """Types the user into the provider's form by keyboard, email_verified ticked."""
        self.on_page(browser)
        browser.type_into("input#email", email)
        browser.type_into("input#sub", sub)
        if not browser.one("input#email_verified").is_selected():
            browser.tab_to("input#email_verified")
            ActionChains(browser.driver).send_keys(Keys.SPACE).perform()
        self.check(browser.one("input#email_verified").is_selected(), "the provider's email_verified is not ticked")
        browser.type_into("input#name", name)

    def approve(self, browser, email, sub, page=None):
        """Signs in at the provider's page as the user and presses Approve; the browser follows the redirects back
        through the server's callback to page `page` (None: any document)."""
        self.fill_in(browser, email, sub)
        return browser.press_on("button#approve", page)

    def approve_for_callback(self, browser, email, sub):
        """What the provider's form posts on Approve, posted by the test without following the answer: the URL of the
        server's callback (with code and state) the provider sends the browser to."""
        self.on_page(browser)
        action = browser.driver.execute_script("return document.querySelector('form').action")
        fields = {"email": email, "sub": sub, "email_verified": "on", "name": "Ada Lovelace", "decision": "approve"}
        status, headers, text = self.server.request("POST", action, form=fields, follow=False)
        location = headers.get("Location") or headers.get("location") or ""
        self.check(
            status == 302 and location.startswith(self.server.base + "/auth/v1/callback?"),
            f"the provider's approval answered {status} to {location!r}, not the server's callback: {text[:300]}",
        )
        return location


def landing(url):
    """The query and fragment parameters of the URL the browser landed on, merged (the fragment's win)."""
    parts = urllib.parse.urlsplit(url)
    found = {name: values[0] for name, values in urllib.parse.parse_qs(parts.query).items()}
    found.update({name: values[0] for name, values in urllib.parse.parse_qs(parts.fragment).items()})
    return parts, found


def authorize_url(server, redirect_to):
    query = urllib.parse.urlencode({"provider": Upstream.IDENTIFIER, "redirect_to": redirect_to})
    return f"{server.base}/auth/v1/authorize?{query}"


def expect_site(server, check, url, what):
    """`url` is the site URL (the server's public URL: scripts/browser-test.sh gives no --site-url)."""
    parts = urllib.parse.urlsplit(url)
    site = urllib.parse.urlsplit(server.base)
    check((parts.scheme, parts.netloc, parts.path or "/") == (site.scheme, site.netloc, "/"),
          f"{what} landed on {url}, not the site URL {server.base}")


def test_provider_sign_in(server, browser, check):
    """Sign-in through an upstream OpenID provider in the browser: /auth/v1/authorize goes to the provider's page, the
    person approves there, and the server's callback lands on redirect_to with the session in the fragment (the
    implicit flow: no code_challenge). A callback opened a second time is refused with bad_oauth_state."""
    email = "upstream@example.com"
    sub = "acme-user-1"
    site = server.base  # the site URL, where GoTrue lands without an allowed redirect_to
    with Upstream(server, check) as acme:
        browser.driver.get(authorize_url(server, site))
        acme.approve(browser, email, sub)
        url = browser.driver.current_url
        expect_site(server, check, url, "the approved sign-in")
        _, found = landing(url)
        check(bool(found.get("access_token")) and bool(found.get("refresh_token")),
              f"no access_token and refresh_token in {url}")
        check(bool(found.get("provider_token")), f"no provider_token in {url}")
        check.equal(found.get("token_type"), "bearer", "the landing's token_type")
        check("error" not in found and "error_code" not in found, f"the approved sign-in landed with an error: {url}")
        status, user = server.api("GET", "/auth/v1/user", token=found["access_token"])
        check(status == 200, f"/auth/v1/user with the landing's access token answered {status}: {user}")
        check.equal(user.get("email"), email, "the signed-in user's email")
        providers = [identity.get("provider") for identity in user.get("identities") or []]
        check(Upstream.IDENTIFIER in providers, f"the signed-in user's identities are at {providers}")
        identity = next(i for i in user["identities"] if i.get("provider") == Upstream.IDENTIFIER)
        check.equal(identity.get("id") or (identity.get("identity_data") or {}).get("sub"), sub,
                    "the custom:acme identity's provider id")

        # The same person again; the provider's redirect to the callback is read, the browser opens it (signed in,
        # the same user), then opens it once more: that trip is spent.
        browser.driver.get(authorize_url(server, site))
        callback = acme.approve_for_callback(browser, email, sub)
        browser.open(callback, None)
        url = browser.driver.current_url
        expect_site(server, check, url, "the callback")
        _, found = landing(url)
        check(bool(found.get("access_token")), f"the callback opened by the browser gave no session: {url}")
        status, again = server.api("GET", "/auth/v1/user", token=found["access_token"])
        check(status == 200 and again.get("id") == user.get("id"),
              f"the second sign-in as {sub} is user {again.get('id')} ({status}), not {user.get('id')}")

        browser.open(callback, None)
        url = browser.driver.current_url
        expect_site(server, check, url, "the replayed callback")
        _, found = landing(url)
        check.equal(found.get("error_code"), "bad_oauth_state", f"the replayed callback's error_code ({url})")
        check("access_token" not in found, f"the replayed callback gave a session: {url}")


def blocked_by_policy(browser):
    """What the browser's console said about the page's content security policy (a form whose answer redirects to
    another origin is blocked unless its form-action allows that origin)."""
    said = [entry.get("message", "") for entry in browser.driver.get_log("browser")]
    return [line for line in said if "Content Security Policy" in line] or said


def identities_on_page(browser):
    """(the providers listed in #identities, the Link buttons, the Remove buttons), as the page says them."""
    section = browser.one("section#identities")
    listed = [e.text.strip() for e in section.find_elements("css selector", "li.identity .identity-provider")]
    links = [e.text.strip() for e in section.find_elements("css selector", "form.link-identity button")]
    removes = [e.text.strip() for e in section.find_elements("css selector", "form.unlink-identity button")]
    return listed, links, removes


def test_link_identity(server, browser, check):
    """The account page's "Ways to sign in": Link Acme goes to the provider, approved there it comes back to the
    account page with the identity listed (another address than the account's: linking does not need it to match);
    Remove Acme unlinks it and offers Link Acme again."""
    email = "linker@example.com"
    server.sign_up(check, email, PASSWORD)
    with Upstream(server, check) as acme:
        sign_in_with_password(browser, email, PASSWORD)
        listed, links, removes = identities_on_page(browser)
        check.equal(listed, ["Email and password"], "the providers in #identities of a new account")
        check.equal(links, ["Link Acme"], "the link-identity buttons")
        check.equal(removes, [], "the unlink-identity buttons of an account with one way in")
        browser.audit("account", shots=False)

        try:
            browser.press_on(f"form.link-identity:has(input[value='{Upstream.IDENTIFIER}']) [type=submit]", None)
        except CheckFailed as failure:
            raise CheckFailed(f"{failure}; the browser's console: {blocked_by_policy(browser)}") from None
        acme.approve(browser, "ada-at-acme@example.org", "acme-linker-1")
        if browser.page_name() != "account":
            cookies = browser.driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]
            held = [f"{c['name']} (path {c['path']}, SameSite={c.get('sameSite')})" for c in cookies]
            raise CheckFailed(
                f"after approving at the provider the browser is not on the account page ({browser.describe()}); "
                f"the browser holds the cookies {held}"
            )
        parts, found = landing(browser.driver.current_url)
        check(parts.path == "/account" and found.get("notice") == "identity_linked",
              f"linking landed on {browser.driver.current_url}, not /account?notice=identity_linked")
        notice = browser.text("#notice")
        check(notice.startswith("The account is linked"), f"#notice after linking: {notice!r}")
        listed, links, removes = identities_on_page(browser)
        check("Acme" in listed, f"#identities after linking lists {listed}")
        check.equal(removes, ["Remove Acme"], "the unlink-identity buttons after linking")
        check.equal(links, [], "the link-identity buttons after linking")
        browser.audit("account", shots=False)
        browser.section_shots("section#identities", "account-identities")

        status, session = server.password_grant(email, PASSWORD)
        check(status == 200, f"the account's password sign-in answered {status}: {session}")
        status, user = server.api("GET", "/auth/v1/user", token=session["access_token"])
        providers = sorted(identity.get("provider") for identity in (user or {}).get("identities") or [])
        check.equal(providers, [Upstream.IDENTIFIER, "email"], "the account's identities through the API")

        browser.press_on("form.unlink-identity [type=submit]", "account")
        parts, found = landing(browser.driver.current_url)
        check(parts.path == "/account" and found.get("notice") == "identity_unlinked",
              f"unlinking landed on {browser.driver.current_url}, not /account?notice=identity_unlinked")
        check(bool(browser.text("#notice")), "the account page after unlinking has an empty #notice")
        listed, links, removes = identities_on_page(browser)
        check.equal(listed, ["Email and password"], "the providers in #identities after unlinking")
        check.equal(links, ["Link Acme"], "the link-identity buttons after unlinking")
        check.equal(removes, [], "the unlink-identity buttons after unlinking")
        status, user = server.api("GET", "/auth/v1/user", token=session["access_token"])
        providers = sorted(identity.get("provider") for identity in (user or {}).get("identities") or [])
        check.equal(providers, ["email"], "the account's identities through the API after unlinking")


# --- 9. single sign-on through a SAML identity provider -------------------------------------------------------------


def mint_service_key(server, check):
    """A service key naming the server's public URL as its issuer, as an operator mints one."""
    minted = server.cli("keys", "service-key", "--public-url", server.base)
    key = minted.stdout.strip()
    check(minted.returncode == 0 and key and "\n" not in key,
          f"`gatehouse keys service-key` exited with {minted.returncode}: {minted.stderr.strip()!r}")
    return key


def admin_call(server, key, method, path, body=None):
    """(status, decoded JSON or the text) of an admin API call made with the service key `key`, as a backend makes
    one."""
    status, _, text = server.request(method, path, body=body, token=key, headers={"apikey": key})
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


class SAMLIdentityProvider:
    """Tests/saml/idp.py (pysaml2, signing through Debian's xmlsec1) in a process of its own: the server's service
    provider metadata registered with it (its POST /sp), and it registered with the server through the admin API as
    the SAML provider of company `company_id` for one fresh domain. For one test, as a context manager: on leaving,
    the provider is removed and the process stopped (it exits when its standard input closes)."""

    def __init__(self, server, check, company_id):
        self.server = server
        self.check = check
        self.company_id = company_id
        self.domain = f"saml-{secrets.token_hex(4)}.example"
        self.log = tempfile.TemporaryFile()
        self.process = None
        self.base = None
        self.service_key = None
        self.provider_id = None

    def __enter__(self):
        try:
            self._start()
            self._register()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_):
        try:
            if self.provider_id:
                admin_call(self.server, self.service_key, "DELETE", f"/auth/v1/admin/sso/providers/{self.provider_id}")
        finally:
            if self.process and self.process.poll() is None:
                self.process.stdin.close()
                try:
                    self.process.wait(timeout=WAIT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            if self.process:
                self.process.stdout.close()
            self.log.close()

    def printed(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace").strip()[-2000:]

    def _start(self):
        """Starts the IdP and reads its "READY <port>" line, up to WAIT seconds (it makes an RSA key first)."""
        self.process = subprocess.Popen(
            [sys.executable, SAML_IDP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log
        )
        out = self.process.stdout.fileno()
        printed = b""
        end = time.monotonic() + WAIT
        while b"\n" not in printed:
            left = end - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"the SAML IdP printed no READY line within {WAIT}s: {printed!r} {self.printed()}")
            readable, _, _ = select.select([out], [], [], left)
            if readable:
                chunk = os.read(out, 256)
                if not chunk:
                    self.process.wait(timeout=WAIT)
                    raise CheckFailed(f"the SAML IdP exited with {self.process.returncode}: {self.printed()}")
                printed += chunk
        line = printed.split(b"\n")[0].decode().strip()
        self.check(re.fullmatch(r"READY \d+", line), f"the SAML IdP printed {line!r}, not READY <port>")
        self.base = f"http://127.0.0.1:{line.split()[1]}"

    def _register(self):
        c = self.check
        status, _, sp_metadata = self.server.request("GET", "/auth/v1/sso/saml/metadata")
        c(status == 200 and "EntityDescriptor" in sp_metadata,
          f"the server's SAML metadata answered {status}: {sp_metadata[:300]}")
        status, _, text = self.server.request("POST", self.base + "/sp", raw=sp_metadata)
        c(status == 204, f"the SAML IdP refused the server's metadata: {status} {text}")
        status, _, idp_metadata = self.server.request("GET", self.base + "/metadata")
        c(status == 200 and "IDPSSODescriptor" in idp_metadata, f"the SAML IdP's metadata answered {status}")
        self.service_key = mint_service_key(self.server, c)
        registration = {"type": "saml", "company_id": self.company_id, "metadata_xml": idp_metadata,
                        "domains": [self.domain]}
        status, provider = admin_call(self.server, self.service_key, "POST", "/auth/v1/admin/sso/providers",
                                      registration)
        c(status == 201 and isinstance(provider, dict) and provider.get("id"),
          f"registering the SAML provider answered {status}: {provider}")
        self.provider_id = provider["id"]  # registered: removed on leaving

    def next(self, shape):
        """The shape of the IdP's next response (its POST /next)."""
        status, _, text = self.server.request("POST", self.base + "/next", body=shape)
        self.check(status == 204, f"the SAML IdP's /next refused {shape}: {status} {text}")

    def start(self, redirect_to):
        """POST /auth/v1/sso for the provider's domain: the IdP's URL, the AuthnRequest in its query."""
        body = {"domain": self.domain, "redirect_to": redirect_to, "skip_http_redirect": True}
        status, answer = self.server.api("POST", "/auth/v1/sso", body)
        url = (answer or {}).get("url") or ""
        self.check(status == 200 and url.startswith(self.base + "/sso/redirect?SAMLRequest="),
                   f"POST /auth/v1/sso answered {status}: {answer}, not this IdP's /sso/redirect")
        return url

    def users_of_domain(self):
        """The addresses of the server's users at the provider's domain (the admin API's user list)."""
        status, answer = admin_call(self.server, self.service_key, "GET", "/auth/v1/admin/users?per_page=1000")
        self.check(status == 200 and isinstance(answer, dict), f"the admin user list answered {status}: {answer}")
        return sorted(u.get("email") or "" for u in answer.get("users") or []
                      if (u.get("email") or "").endswith("@" + self.domain))


def wait_for_landing(browser, key, what):
    """Polls, up to WAIT seconds, until the URL the browser shows carries `key` in its fragment or query; returns
    that URL."""
    try:
        WebDriverWait(browser.driver, WAIT).until(lambda d: key in landing(d.current_url)[1])
    except TimeoutException:
        raise CheckFailed(f"{what}: the browser did not land on a URL with {key} within {WAIT}s; {browser.describe()}")
    return browser.driver.current_url


def expect_account_landing(server, check, url, what):
    """`url` is the account page (redirect_to), or the sign-in page it sends a browser without the page's cookie
    to: a redirect without a fragment keeps the one the browser had, so the session or error is still there."""
    parts = urllib.parse.urlsplit(url)
    site = urllib.parse.urlsplit(server.base)
    check((parts.scheme, parts.netloc) == (site.scheme, site.netloc) and parts.path in ("/account", "/account/sign-in"),
          f"{what} landed on {url}, not redirect_to {server.base}/account")


def test_saml_sign_in(server, browser, check):
    """Single sign-on through a company's SAML identity provider in the browser (HTTP-POST binding): POST
    /auth/v1/sso answers the IdP's URL, the IdP's page posts its signed answer to the server's assertion consumer
    service (a cross-site form post), which lands on redirect_to with the session in the fragment. An XML signature
    wrapping attack and an unsigned answer, through the same browser, land there with validation_failed and make no
    account."""
    owner = server.sign_up(check, "saml-owner@example.com", PASSWORD)["access_token"]
    status, company = server.api("POST", "/v1/companies", {"name": "SAML Browser Co"}, token=owner)
    check(status in (200, 201), f"creating a company answered {status}: {company}")
    cid = company["id"]
    result = server.cli("companies", "set-tier", cid, "enterprise")
    check(result.returncode == 0, f"companies set-tier enterprise failed: {result.stderr}")
    redirect_to = server.base + "/account"  # below the site URL: in the redirect allow-list
    with SAMLIdentityProvider(server, check, cid) as idp:
        email = f"ada@{idp.domain}"
        idp.next({"mode": "signed-assertion", "name_id": email, "name_id_format": "email",
                  "attributes": {"email": [email], "name": ["Ada Lovelace"]}})
        browser.driver.get(idp.start(redirect_to))
        url = wait_for_landing(browser, "access_token", "the signed answer")
        expect_account_landing(server, check, url, "the signed answer")
        _, found = landing(url)
        check("error_code" not in found, f"the signed answer landed with an error: {url}")
        check(bool(found.get("refresh_token")), f"no refresh_token in {url}")
        check.equal(found.get("token_type"), "bearer", "the landing's token_type")
        status, user = server.api("GET", "/auth/v1/user", token=found["access_token"])
        check(status == 200, f"/auth/v1/user with the landing's access token answered {status}: {user}")
        check.equal(user.get("email"), email, "the SSO user's email")
        check.equal(user.get("is_sso_user"), True, "the SSO user's is_sso_user")
        providers = [identity.get("provider") for identity in user.get("identities") or []]
        check.equal(providers, [f"sso:{idp.provider_id}"], "the SSO user's identities")
        status, companies = server.api("GET", "/v1/companies", token=found["access_token"])
        listed = [entry.get("id") for entry in (companies or {}).get("companies") or []]
        check(status == 200 and cid in listed, f"the SSO user's companies are {listed} ({status}), not {cid}")

        # The attacks, through the same browser: the IdP's page posts them as it posted the real answer.
        for mode in ("xsw3", "unsigned"):
            evil = f"attacker-{mode}@{idp.domain}"
            idp.next({"mode": mode, "evil_name_id": evil})
            browser.driver.get(idp.start(redirect_to))
            url = wait_for_landing(browser, "error_code", f"the {mode} answer")
            expect_account_landing(server, check, url, f"the {mode} answer")
            _, found = landing(url)
            check.equal(found.get("error_code"), "validation_failed", f"the {mode} answer's error_code ({url})")
            check((found.get("error_description") or "").startswith("SAML Assertion is not valid"),
                  f"the {mode} answer's error_description: {found.get('error_description')!r}")
            check("access_token" not in found and "code" not in found, f"the {mode} answer gave a session: {url}")
            check.equal(idp.users_of_domain(), [email], f"the users at {idp.domain} after the {mode} answer")


# --- 10. invitations by email ---------------------------------------------------------------------------------------


def test_invitation_acceptance(server, browser, check):
    """An owner invites an address; its mailed link opens the account page (after signing in), which lists the
    invitation, the linked one marked, with its Join and Decline buttons; Join, by keyboard, makes the account a
    member, and the page says so."""
    owner_email = "inviter@example.com"
    invitee = "invitee@example.com"
    owner = server.sign_up(check, owner_email, PASSWORD, first_name="Olive")["access_token"]
    server.sign_up(check, invitee, PASSWORD)  # its sign-up mail first: the invitation is the next mail to it
    status, company = server.api("POST", "/v1/companies", {"name": "Invited Browser Co"}, token=owner)
    check(status in (200, 201), f"creating a company answered {status}: {company}")
    cid = company["id"]
    result = server.cli("companies", "set-tier", cid, "business")  # the Free tier does not invite
    check(result.returncode == 0, f"companies set-tier failed: {result.stderr}")
    credential = {"username": "olive-owner", "password": "a long company password"}
    status, answer = server.api("PUT", f"/v1/companies/{cid}/credential", credential, token=owner)
    check(status in (200, 201, 204), f"credential PUT answered {status}: {answer}")
    status, login = server.api("POST", f"/v1/companies/{cid}/login", credential, token=owner)
    check(status == 200, f"company login answered {status}: {login}")
    company_token = login["access_token"]
    status, invitation = server.api("POST", f"/v1/companies/{cid}/invitations", {"email": invitee, "role": "member"},
                                    token=company_token)
    check(status == 201, f"inviting {invitee} answered {status}: {invitation}")

    mail = server.outbox.next(invitee)
    check(mail.invitation is not None, f"the invitation mail has no /account?invitation= link: {mail.text!r}")
    check(mail.code is not None, f"the invitation mail has no 6-digit code: {mail.text!r}")
    check(mail.invitation.startswith(server.base + "/account?invitation="),
          f"the invitation link {mail.invitation} is not on the server's public URL {server.base}")

    # Not signed in: the link's account page asks to sign in first.
    browser.open(mail.invitation, "sign-in")
    browser.type_into("form#password-sign-in input#email", invitee)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", "account")
    rows = browser.css("section#invitations li.invitation")
    check.equal(len(rows), 1, "the li.invitation in section#invitations after signing in")
    check("Invited Browser Co" in rows[0].text and "Olive" in rows[0].text,
          f"the invitation reads {rows[0].text!r}, not naming the company and the inviter")

    # Signed in, the link opens the account page with its invitation marked.
    browser.open(mail.invitation, "account")
    linked = browser.css("li.invitation.linked")
    check.equal(len(linked), 1, "the li.invitation.linked on the page the link opens")
    join = browser.text("li.invitation.linked form.accept-invitation [type=submit]")
    check.equal(join, "Join Invited Browser Co", "the invitation's accept button")
    decline = browser.text("li.invitation.linked form.decline-invitation [type=submit]")
    check.equal(decline, "Decline", "the invitation's decline button")
    browser.audit("account", shots=False)

    browser.press_on("li.invitation.linked form.accept-invitation [type=submit]", "account")
    parts, found = landing(browser.driver.current_url)
    check(parts.path == "/account" and found.get("notice") == "invitation_accepted",
          f"joining landed on {browser.driver.current_url}, not /account?notice=invitation_accepted")
    notice = browser.text("#notice")
    check(notice.startswith("You joined the company"), f"#notice after joining: {notice!r}")
    check(not browser.css("section#invitations"), "the invitation is still listed after joining")

    status, session = server.password_grant(invitee, PASSWORD)
    check(status == 200, f"the invitee's password sign-in answered {status}: {session}")
    status, companies = server.api("GET", "/v1/companies", token=session["access_token"])
    joined = [entry for entry in (companies or {}).get("companies") or [] if entry.get("id") == cid]
    check(status == 200 and len(joined) == 1, f"the invitee's companies ({status}) do not list {cid}: {companies}")
    check.equal(joined[0].get("role"), "member", "the invitee's role in the company")
    status, listed = server.api("GET", f"/v1/companies/{cid}/invitations", token=company_token)
    states = [entry.get("state") for entry in (listed or {}).get("invitations") or []]
    check(status == 200 and states == ["accepted"], f"the owner's invitation list ({status}) says {states}")



# --- 11. the operator console ---------------------------------------------------------------------------------------

PWNED = "return typeof window.__pwned"  # 'undefined' unless a printed value ran as script


def press(browser, selector, page):
    """Focuses a control and presses ENTER on it: the keyboard's activation without the TAB walk to it, which
    `press_on` (and each page's focus walk) covers. The next page must be `page`."""
    element = browser.one(selector)
    browser.driver.execute_script("arguments[0].focus()", element)
    browser.check(browser.active_matches(selector), f"{selector} cannot take the focus on {browser.page_name()!r}")
    return browser.submit(Keys.ENTER, page)


def password_sign_in(browser, check, email, path, page):
    """The sign-in page at `path`, its password form by keyboard, landing on `page`."""
    browser.open(path, "sign-in")
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", None)
    check(browser.page_name() == page, f"the password sign-in did not reach {page}; {browser.describe()}")


def own_address(browser, address):
    """This browser's requests come from `address` (an X-Forwarded-For the server trusts from loopback): the tests
    before this one spent the suite's address's sign-in limit (30 in 5 minutes), and a person at another address is
    not held to it."""
    browser.driver.execute_cdp_cmd("Network.enable", {})
    browser.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-Forwarded-For": address}})


def choose(browser, selector, value):
    """Sets a <select> to option `value` (a shortcut for its arrow keys); the form is then sent by keyboard."""
    element = browser.one(selector)
    browser.driver.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'))", element, value
    )
    browser.check.equal(element.get_attribute("value"), value, f"the value of {selector}")


def confirm_step(browser, check, form, explains):
    """A console action's form, then its confirmation page (`console-confirm`) naming what it does, then its
    confirm button: back on the page the action answers with."""
    press(browser, f"form#{form} [type=submit]", "console-confirm")
    text = browser.text("#confirm-explanation")
    check(explains.lower() in text.lower() or explains in browser.text("h1"),
          f"the confirmation of {form} does not name {explains!r}: {browser.text('h1')!r} / {text!r}")
    check(bool(browser.css("form#confirm input[name=confirm][value=yes]")),
          f"the confirmation of {form} lacks confirm=yes")
    check(bool(browser.css("form#confirm a.button[href]")), f"the confirmation of {form} has no way back")


def no_page_scroll(browser, check, what):
    """At a phone's 375 px the page itself does not scroll sideways; wide tables scroll inside their .scroll box."""
    d = browser.driver
    d.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": True}
    )
    try:
        d.refresh()
        browser.expect(None)
        sizes = d.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth,"
            " [...document.querySelectorAll('main *')].filter(e => e.scrollWidth > e.clientWidth + 1"
            " && !e.closest('.scroll') && getComputedStyle(e).display !== 'inline')"
            " .slice(0, 4).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : ''))]"
        )
        # A page wider than the phone makes Chromium zoom out, so innerWidth grows with it: both are checked.
        check(sizes[1] == 375 and sizes[0] <= sizes[1],
              f"{what} at 375 px scrolls sideways: scrollWidth {sizes[0]}, innerWidth {sizes[1]}; "
              f"overflowing: {sizes[2]}")
    finally:
        d.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride", {"width": 420, "height": 900, "deviceScaleFactor": 1, "mobile": True}
        )
        d.refresh()
        browser.expect(None)


def make_user(server, check, key, email, password=None, metadata=None):
    """An account made through the admin API, its address confirmed; its id."""
    body = {"email": email, "email_confirm": True}
    if password:
        body["password"] = password
    if metadata:
        body["user_metadata"] = metadata
    status, user = admin_call(server, key, "POST", "/auth/v1/admin/users", body)
    check(status in (200, 201) and isinstance(user, dict) and user.get("id"),
          f"the admin API's create of {email} answered {status}: {user}")
    return user["id"]


def session_by_link(server, check, key, email):
    """A session for `email` from a sign-in code the admin API generates: a verification, not a password sign-in,
    whose per-address limit the whole suite's sign-ins share."""
    asked = {"type": "magiclink", "email": email}
    status, made = admin_call(server, key, "POST", "/auth/v1/admin/generate_link", asked)
    check(status == 200 and isinstance(made, dict) and made.get("email_otp"),
          f"generate_link for {email} answered {status}: {made}")
    return server.verify_code(check, email, made["email_otp"], "magiclink")


def enroll_app(server, check, token):
    """An authenticator app on the account of `token`, through the API, verified with pyotp's code."""
    enrolling = {"factor_type": "totp", "friendly_name": "Phone"}
    status, factor = server.api("POST", "/auth/v1/factors", enrolling, token=token)
    check(status == 200 and factor.get("id"), f"enrolling a factor answered {status}: {factor}")
    status, challenge = server.api("POST", f"/auth/v1/factors/{factor['id']}/challenge", {}, token=token)
    check(status == 200 and challenge.get("id"), f"the factor's challenge answered {status}: {challenge}")
    code = pyotp.TOTP(factor["totp"]["secret"]).now()
    status, verified = server.api("POST", f"/auth/v1/factors/{factor['id']}/verify",
                                  {"challenge_id": challenge["id"], "code": code}, token=token)
    check(status == 200, f"verifying the factor answered {status}: {verified}")
    return factor["id"]


def console_row(browser, table, text):
    """The rows of table#`table` whose text holds `text`."""
    return [row for row in browser.css(f"table#{table} tbody tr") if text in row.text]


def test_console(server, browser, check):
    """The operator console (/console) end to end: closed to anyone but an operator signed in with a second factor,
    reached through the sign-in page's ?next=; the overview's charts for each range, the users list (search, a
    filter, the next page), a user's page and each action through its confirmation step, companies and a tier
    override, the audit explorer (a filter, a request's and a session's link, the CSV), service keys minted and
    revoked, a webhook endpoint added and removed, an OAuth client added and removed; every page audited; stored markup printed as text; 375 px wide without sideways scroll; in German."""
    own_address(browser, "10.40.0.1")
    operator = "console-operator@example.com"
    server.sign_up(check, operator, PASSWORD)
    password_sign_in(browser, check, operator, "/account/sign-in", "account")
    press(browser, "form#add-factor [type=submit]", "factor-setup")
    app = Authenticator(scan_qr_code(browser, check))
    browser.type_into("form#factor-form input#code", app.code())
    browser.press_on("form#factor-form [type=submit]", "recovery-codes")
    browser.press_on("a#continue", "account")

    # Not an operator yet: the console is a path that does not exist (the router's 404 page), even at aal2.
    browser.open("/console/no-such-page", "error")
    missing = browser.text("main")
    browser.open("/console", "error")
    check.equal(browser.text("main"), missing, "/console for a non-operator, against an unknown path's page")
    added = server.cli("operators", "add", operator)
    check(added.returncode == 0, f"`gatehouse operators add` exited {added.returncode}: {added.stderr.strip()!r}")
    browser.open("/account", "account")
    press(browser, "form#sign-out [type=submit]", None)

    # Signed out: the same 404 page.
    status, _, _ = server.request("GET", "/console", follow=False)
    check.equal(status, 404, "/console without a session")
    browser.open("/console", "error")
    check.equal(browser.text("main"), missing, "/console without a session, against an unknown path's page")
    check.equal(urllib.parse.urlsplit(browser.driver.current_url).path, "/console", "the URL of /console signed out")

    # Sign in with ?next=/console: password, the app's code, then the overview.
    password_sign_in(browser, check, operator, "/account/sign-in?next=/console", "second-factor")
    browser.type_into("form#second-factor-form input#code", app.code())
    browser.press_on("form#second-factor-form [type=submit]", "console-overview")
    check.equal(urllib.parse.urlsplit(browser.driver.current_url).path, "/console", "the page after the code")
    check.equal(browser.driver.execute_script("return document.documentElement.lang"), "en", "<html lang>")
    current = browser.css("header.console-bar nav a[aria-current=page]")
    check(len(current) == 1 and current[0].text == "Overview", "the console's nav does not mark Overview as current")
    check(operator in browser.text("header.console-bar"), "the console's bar does not name the operator")
    browser.audit("console-overview")
    for range_name in ("hour", "day", "week"):
        browser.open(f"/console?range={range_name}", "console-overview")
        charts = browser.css(".charts section.chart svg[role=img]")
        check.equal(len(charts), 8, f"the overview's charts (svg role=img) for range={range_name}")
        labels = [svg.get_attribute("aria-label") or "" for svg in charts]
        check(all(label.strip() for label in labels), f"a chart without aria-label for {range_name}: {labels}")
        ranges = browser.css("#overview-ranges a[aria-current=page]")
        check(len(ranges) == 1 and f"range={range_name}" in ranges[0].get_attribute("href"),
              f"the range links do not mark {range_name} as current")
        check(browser.text("#overview-health dd") != "", "the overview's health says nothing")
    browser.audit("console-overview", shots=False)
    no_page_scroll(browser, check, "the overview")

    # People to look after, through the admin API.
    key = mint_service_key(server, check)
    target = "console-target@example.com"
    target_id = make_user(server, check, key, target)
    session = session_by_link(server, check, key, target)
    factor_id = enroll_app(server, check, session["access_token"])
    evil_markup = "<img src=x onerror=window.__pwned=1>"
    evil = "console-markup@example.com"
    evil_id = make_user(server, check, key, evil, metadata={"note": evil_markup})
    # The browser's session cookie is the operator's access token (at aal2): the operator owns the company.
    cookie = browser.driver.get_cookie("gh_session")
    check(cookie is not None, "the browser holds no gh_session cookie")
    operator_token = cookie["value"]
    company_markup = "<script>window.__pwned=1</script>"
    status, company = server.api("POST", "/v1/companies", {"name": company_markup}, token=operator_token)
    check(status in (200, 201), f"creating the company answered {status}: {company}")
    cid = company["id"]
    for number in range(52):
        make_user(server, check, key, f"console-many-{number:02}@example.com")

    # The users list: 50 a page, the next page, a search by address, a filter (by keyboard).
    browser.open("/console/users", "console-users")
    check.equal(len(browser.css("table#users tbody tr.user")), 50, "the users on the list's first page")
    browser.audit("console-users")
    no_page_scroll(browser, check, "the users list")
    press(browser, "a#users-next", "console-users")
    rest = browser.css("table#users tbody tr.user")
    check(1 <= len(rest) <= 50, f"the list's second page shows {len(rest)} users")
    check(bool(browser.css("nav.pager a[href='/console/users']")), "the second page has no link to the first")
    browser.open("/console/users", "console-users")
    browser.type_into("input#users-q", target)
    browser.press_on("form.filters [type=submit]", "console-users")
    rows = browser.css("table#users tbody tr.user")
    check(len(rows) == 1 and target in rows[0].text, f"searching {target} lists {[r.text for r in rows]}")
    check("Second factor" in rows[0].text, f"the target's row has no factor badge: {rows[0].text!r}")
    check.equal(browser.one("input#users-q").get_attribute("value"), target, "the search field after searching")
    browser.open("/console/users?has_factor=yes&sort=email", "console-users")
    listed = [row.get_attribute("data-user-id") for row in browser.css("table#users tbody tr.user")]
    check(target_id in listed and evil_id not in listed, f"has_factor=yes lists {listed}")
    browser.open("/console/users?confirmed=maybe", "console-users")
    check(bool(browser.text("#console-error")), "a filter value the list cannot use shows no error")

    # A user's page, and each action through its confirmation.
    browser.open("/console/users?q=" + urllib.parse.quote(target), "console-users")
    press(browser, "table#users tbody tr.user a", "console-user")
    check.equal(browser.text("#user-id"), target_id, "#user-id")
    check(target in browser.text("#user-email"), f"#user-email is {browser.text('#user-email')!r}")
    check(bool(browser.css(f"table#factors tr.factor[data-factor-id='{factor_id}']")), "the target's app is not listed")
    check(len(browser.css("table#sessions tr.session")) >= 1, "the target's session is not listed")
    browser.audit("console-user")
    no_page_scroll(browser, check, "a user's page")

    confirm_step(browser, check, "end-sessions", target)
    browser.audit("console-confirm")
    press(browser, "form#confirm [type=submit]", "console-user")
    check.equal(browser.text("#notice"), "Every session is ended.", "#notice after ending the sessions")
    check(not browser.css("table#sessions tr.session"), "sessions are listed after ending them all")
    refresh = {"refresh_token": session["refresh_token"]}
    status, _ = server.api("POST", "/auth/v1/token?grant_type=refresh_token", refresh)
    check(status in (400, 401), f"an ended session's refresh answered {status}")

    choose(browser, "select#ban-duration", "1h")
    confirm_step(browser, check, "ban", target)
    check("1 hour" in browser.text("#confirm-explanation"), "the ban's confirmation does not say 1 hour")
    press(browser, "form#confirm [type=submit]", "console-user")
    check.equal(browser.text("#notice"), "The user is banned.", "#notice after the ban")
    check(browser.text("#user-ban").startswith("Banned until"), f"#user-ban says {browser.text('#user-ban')!r}")
    status, user = admin_call(server, key, "GET", f"/auth/v1/admin/users/{target_id}")
    check(status == 200 and (user or {}).get("banned_until"), f"the admin API's user after the ban: {status} {user}")
    browser.open("/console/users?banned=yes", "console-users")
    rows = browser.css("table#users tbody tr.user")
    check(len(rows) == 1 and target in rows[0].text and "Banned" in rows[0].text,
          f"banned=yes lists {[r.text for r in rows]}")
    press(browser, "table#users tbody tr.user a", "console-user")
    confirm_step(browser, check, "unban", target)
    press(browser, "form#confirm [type=submit]", "console-user")
    check.equal(browser.text("#notice"), "The ban is lifted.", "#notice after unbanning")
    check(not browser.css("form#unban"), "the unban form stays after unbanning")
    status, user = admin_call(server, key, "GET", f"/auth/v1/admin/users/{target_id}")
    check(status == 200 and not (user or {}).get("banned_until"), f"the admin API's user after unbanning: {user}")

    press(browser, f"table#factors tr.factor[data-factor-id='{factor_id}'] form.remove-factor [type=submit]",
          "console-confirm")
    press(browser, "form#confirm [type=submit]", "console-user")
    check.equal(browser.text("#notice"), "The factor is removed.", "#notice after removing the app")
    check(not browser.css("table#factors tr.factor"), "the removed app is still listed")

    confirm_step(browser, check, "recovery", target)
    press(browser, "form#confirm [type=submit]", "console-user")
    check.equal(browser.text("#notice"), "A password reset mail is on its way to the user.", "#notice after the mail")
    mail = server.outbox.next(target)
    check(mail.link is not None and "type=recovery" in mail.link,
          f"the recovery mail has no recovery link: {mail.text!r}")

    choose(browser, "select#link-type", "magiclink")
    confirm_step(browser, check, "link", target)
    press(browser, "form#confirm [type=submit]", "console-user-link")
    link = browser.text("code#action-link")
    check("/auth/v1/verify" in link, f"code#action-link is {link!r}")
    otp = browser.text("code#email-otp")
    check(re.fullmatch(r"\d{6}", otp), f"code#email-otp is {otp!r}")
    browser.audit("console-user-link")
    token = link_parts(link).get("token")
    browser.open(f"/console/users/{target_id}", "console-user")
    check(token and token not in browser.driver.page_source, "the user's page shows the generated link again")

    confirm_step(browser, check, "delete", target)
    press(browser, "form#confirm [type=submit]", "console-users")
    check.equal(browser.text("#notice"), "The user is deleted.", "#notice after deleting")
    check(target_id not in browser.driver.page_source, "the deleted user is still listed")
    browser.open("/console/users?q=" + urllib.parse.quote(target), "console-users")
    check(not browser.css("table#users tbody tr.user") and bool(browser.css("#users-empty")),
          "searching the deleted user finds a row")

    # Stored markup is printed as text: the user's metadata and the company's name, on lists and pages.
    browser.open("/console/users?q=" + urllib.parse.quote(evil), "console-users")
    press(browser, "table#users tbody tr.user a", "console-user")
    check(evil_markup in browser.text("#user-metadata"), f"#user-metadata is {browser.text('#user-metadata')!r}")
    check(not browser.css("main img, main script"), "markup from the user's metadata became an element")
    check.equal(browser.driver.execute_script(PWNED), "undefined", "window.__pwned on the markup user's page")
    browser.open("/console/companies?q=" + urllib.parse.quote("<script>"), "console-companies")
    rows = console_row(browser, "companies", company_markup)
    check(len(rows) == 1, f"the companies list does not show {company_markup!r} as text")
    check.equal(browser.driver.execute_script(PWNED), "undefined", "window.__pwned on the companies list")

    # Companies: the list, a company, its tier overridden with a reason.
    browser.open("/console/companies", "console-companies")
    check(len(console_row(browser, "companies", company_markup)) == 1, "the company is not on the list")
    browser.audit("console-companies")
    no_page_scroll(browser, check, "the companies list")
    browser.open("/console/companies?tier=free", "console-companies")
    check(len(console_row(browser, "companies", company_markup)) == 1, "tier=free does not list the Free company")
    browser.open("/console/companies?tier=enterprise", "console-companies")
    check(not console_row(browser, "companies", company_markup), "tier=enterprise lists the Free company")
    browser.open(f"/console/companies/{cid}", "console-company")
    check.equal(browser.text("h1"), company_markup, "the company page's <h1>")
    check.equal(browser.driver.execute_script(PWNED), "undefined", "window.__pwned on the company page")
    check(not browser.css("main script"), "the company's name became a <script> on its page")
    check(operator in browser.text("table#members"), "the company's members do not list its owner")
    check.equal(browser.text("#company-tier"), "free", "#company-tier")
    browser.audit("console-company")
    no_page_scroll(browser, check, "a company's page")
    choose(browser, "select#tier-choice", "enterprise")
    browser.type_into("input#tier-reason", "Pilot customer, signed contract")
    browser.press_on("form#tier-form [type=submit]", "console-confirm")
    check("enterprise" in browser.text("#confirm-explanation"), "the tier's confirmation does not name enterprise")
    press(browser, "form#confirm [type=submit]", "console-company")
    check(bool(browser.text("#notice")), "no #notice after the tier change")
    check.equal(browser.text("#company-tier"), "enterprise", "#company-tier after the override")
    check.equal(browser.text("#company-tier-reason"), "Pilot customer, signed contract", "#company-tier-reason")
    choose(browser, "select#tier-choice", "business")
    browser.type_into("input#tier-reason", " ")
    press(browser, "form#tier-form [type=submit]", "console-company")
    check(bool(browser.text("#console-error")), "a tier change without a reason shows no error")
    check.equal(browser.text("#company-tier"), "enterprise", "#company-tier after a change without a reason")

    # The audit trail: a filter by action, a request's and a session's link, the CSV.
    browser.open("/console/audit", "console-audit")
    check(len(browser.css("table#audit-events tbody tr")) >= 1, "the audit explorer lists no event")
    browser.audit("console-audit")
    no_page_scroll(browser, check, "the audit explorer")
    choose(browser, "select#audit-action", "account_deleted")
    press(browser, "form.filters [type=submit]", "console-audit")
    actions = {cell.text for cell in browser.css("table#audit-events tbody td:nth-child(2)")}
    check(actions == {"account_deleted"}, f"action=account_deleted lists actions {actions}")
    check(target_id in browser.text("table#audit-events"), "the deletion's event does not name the user")
    browser.open("/console/audit", "console-audit")
    request_links = browser.css("table#audit-events tbody td:nth-child(7) a")
    check(bool(request_links), "no event in the explorer links its request")
    request_id = request_links[0].text
    press(browser, "table#audit-events tbody td:nth-child(7) a", "console-audit")
    check.equal(browser.one("input#audit-request").get_attribute("value"), request_id, "the request filter's field")
    shown = {cell.text for cell in browser.css("table#audit-events tbody td:nth-child(7)")}
    check(shown == {request_id}, f"the request's link lists requests {shown}")
    browser.open("/console/audit", "console-audit")
    browser.type_into("input#audit-actor", operator)
    browser.press_on("form.filters [type=submit]", "console-audit")
    accounts = {cell.text for cell in browser.css("table#audit-events tbody td:nth-child(3)")}
    check(len(accounts) == 1, f"actor={operator} lists the events of accounts {accounts}")
    operator_id = accounts.pop()
    session_links = browser.css("table#audit-events tbody td:nth-child(6) a")
    check(bool(session_links), f"none of the operator's events links its session; {browser.describe()}")
    session_id = session_links[0].text
    press(browser, "table#audit-events tbody td:nth-child(6) a", "console-audit")
    shown = {cell.text for cell in browser.css("table#audit-events tbody td:nth-child(6)")}
    check(shown == {session_id}, f"the session's link lists sessions {shown}")
    browser.open("/console/audit?action=console_action", "console-audit")
    csv = browser.one("a#audit-csv").get_attribute("href")
    check(urllib.parse.urlsplit(csv).path == "/console/audit.csv" and "action=console_action" in csv,
          f"a#audit-csv goes to {csv}")
    cookie = browser.driver.get_cookie("gh_session")
    check(cookie is not None, "the browser holds no gh_session cookie")
    status, headers, text = server.request("GET", csv, headers={"Cookie": f"gh_session={cookie['value']}"})
    kind = {name.lower(): value for name, value in headers.items()}.get("content-type", "")
    check(status == 200 and kind.startswith("text/csv"), f"the CSV answered {status} {kind}")
    check("console_action" in text and "account_deleted" not in text,
          f"the CSV for action=console_action: {text[:300]!r}")
    check(operator_id in text and "recovery_mail_sent" in text,
          f"the console's actions in the CSV do not name the operator {operator_id}: {text[:300]!r}")
    status, _, _ = server.request("GET", csv)
    check.equal(status, 404, "the CSV without the operator's session")

    # Keys: one minted (its token shown once), then revoked.
    browser.open("/console/settings", "console-settings")
    browser.audit("console-settings")
    no_page_scroll(browser, check, "keys and settings")
    confirm_step(browser, check, "mint-key", "key")
    press(browser, "form#confirm [type=submit]", "console-key-minted")
    minted = browser.text("#minted-id")
    token = browser.one("textarea#minted-token").get_attribute("value").strip()
    check(len(token) > 40 and "\n" not in token, f"textarea#minted-token holds {token[:60]!r}")
    status, _ = admin_call(server, token, "GET", "/auth/v1/admin/users?per_page=1")
    check.equal(status, 200, "the minted key on the admin API")
    browser.audit("console-key-minted")
    browser.open("/console/settings", "console-settings")
    check(token not in browser.driver.page_source, "the settings page shows the minted token again")
    rows = console_row(browser, "service-keys", minted)
    check(len(rows) == 1 and bool(rows[0].find_elements("css selector", "form[action$='/revoke']")),
          f"the minted key's row: {[r.text for r in rows]}")
    press(browser, f"form[action='/console/settings/keys/{minted}/revoke'] [type=submit]", "console-confirm")
    check(minted in browser.text("#confirm-explanation"), "the revoke confirmation does not name the key")
    press(browser, "form#confirm [type=submit]", "console-settings")
    check(bool(browser.text("#notice")), "no #notice after revoking the key")
    check(not browser.css(f"form[action='/console/settings/keys/{minted}/revoke']"),
          "the revoked key can still be revoked")
    status, _ = admin_call(server, token, "GET", "/auth/v1/admin/users?per_page=1")
    check(status in (401, 403), f"the revoked key on the admin API answered {status}")

    # Webhooks: an endpoint added (its secret shown once), its page with the delivery log, then removed.
    browser.open("/console/webhooks", "console-webhooks")
    browser.audit("console-webhooks")
    browser.type_into("#webhook-url", "https://hooks.example.com/gatehouse")
    browser.tab_to("[id='event-records.changed']")
    ActionChains(browser.driver).send_keys(Keys.SPACE).perform()
    press(browser, "form#add-webhook [type=submit]", "console-webhook-secret")
    browser.audit("console-webhook-secret")
    secret = browser.driver.execute_script("return document.getElementById('webhook-secret').value")
    check(secret.startswith("whsec_"), f"the new endpoint's secret reads {secret[:8]!r}…")
    browser.press_on("a[href^='/console/webhooks/']", "console-webhook")
    browser.audit("console-webhook")
    check(secret not in browser.driver.page_source, "the endpoint's page shows its secret again")
    confirm_step(browser, check, "remove", "hooks.example.com")
    press(browser, "form#confirm [type=submit]", "console-webhooks")
    check("hooks.example.com" not in browser.text("main"), "the removed endpoint is still listed")

    # OAuth clients: a confidential one added (its secret shown once), its page, then removed.
    browser.open("/console/oauth-clients", "console-oauth-clients")
    browser.audit("console-oauth-clients")
    browser.type_into("#oauth-client-name", "Partner dashboard")
    browser.type_into("#oauth-client-redirect-uris", "https://partner.example.com/callback")
    press(browser, "form#add-oauth-client [type=submit]", "console-oauth-client")
    browser.audit("console-oauth-client")
    client_secret = browser.driver.execute_script("return document.getElementById('oauth-client-secret').value")
    check(len(client_secret) >= 32, f"the new client's secret reads {client_secret[:4]!r}…")
    client_id = browser.text("#oauth-client-id")
    browser.open("/console/oauth-clients", "console-oauth-clients")
    browser.press_on(f"a[href='/console/oauth-clients/{client_id}']", "console-oauth-client")
    check(client_secret not in browser.driver.page_source, "the client's page shows its secret again")
    confirm_step(browser, check, "remove", "Partner dashboard")
    press(browser, "form#confirm [type=submit]", "console-oauth-clients")
    check("Partner dashboard" not in browser.text("main"), "the removed client is still listed")

    # In German, from the operator's own locale.
    token = browser.driver.get_cookie("gh_session")["value"]
    status, answer = server.api("PUT", "/auth/v1/user", {"data": {"locale": "de"}}, token=token)
    check(status == 200, f"setting the operator's locale answered {status}: {answer}")
    browser.open("/console/users", "console-users")
    check.equal(browser.driver.execute_script("return document.documentElement.lang"), "de", "<html lang> in German")
    nav = [a.text for a in browser.css("header.console-bar nav a")]
    check("Benutzer" in nav, f"the German console's nav says {nav}")
    browser.audit("console-users", shots=False)
    browser.open("/console", "console-overview")
    lang = browser.driver.execute_script("return document.documentElement.lang")
    check.equal(lang, "de", "<html lang> on the German overview")
    browser.audit("console-overview", shots=False)


# --- 12. Gatehouse as an OAuth provider -----------------------------------------------------------------------------

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def unused_origin():
    """http://127.0.0.1:PORT on a port nothing listens on: a client's app that never answers, so the browser stops at
    the URL it was sent to and the test reads the answer from the address bar."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def pkce_pair():
    """A PKCE verifier and its S256 challenge (RFC 7636 §4.2)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def jwt_claims(token):
    """The payload of a JWT, unverified (the id token is verified against the JWKS separately)."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class OAuthApp:
    """A client of Gatehouse's OAuth provider, registered by the operator through the admin API (public: PKCE and no
    secret, as a browser or native app), its redirect URI on `unused_origin`. It builds authorization URLs and, as the
    app's backend would, exchanges codes and reads userinfo over HTTP."""

    def __init__(self, server, check, name, grant_types, scope="openid email profile"):
        self.server = server
        self.check = check
        self.name = name
        self.redirect_uri = unused_origin() + "/oauth/callback"
        key = mint_service_key(server, check)
        body = {"client_name": name, "redirect_uris": [self.redirect_uri], "client_type": "public",
                "grant_types": grant_types, "scope": scope}
        status, client = admin_call(server, key, "POST", "/auth/v1/admin/oauth/clients", body)
        check(status in (200, 201) and isinstance(client, dict) and client.get("client_id"),
              f"registering the OAuth client {name!r} answered {status}: {client}")
        check("client_secret" not in client or not client["client_secret"],
              f"a public client was given a secret: {client}")
        self.client_id = client["client_id"]
        status, self.discovery = server.api("GET", "/auth/v1/.well-known/openid-configuration")
        check(status == 200 and (self.discovery or {}).get("issuer"), f"discovery answered {status}: {self.discovery}")
        self.issuer = self.discovery["issuer"]

    def authorize_url(self, challenge, state, scope="openid email profile", **extra):
        query = {"response_type": "code", "client_id": self.client_id, "redirect_uri": self.redirect_uri,
                 "scope": scope, "state": state, "code_challenge": challenge, "code_challenge_method": "S256", **extra}
        return f"{self.server.base}/auth/v1/oauth/authorize?{urllib.parse.urlencode(query)}"

    def landed(self, browser, what):
        """Polls, up to WAIT seconds, until the browser is at the redirect URI; its query parameters."""
        try:
            WebDriverWait(browser.driver, WAIT).until(lambda d: d.current_url.startswith(self.redirect_uri + "?"))
        except TimeoutException:
            raise CheckFailed(f"{what}: the browser did not reach {self.redirect_uri} within {WAIT}s; "
                              f"{browser.describe()}") from None
        _, found = landing(browser.driver.current_url)
        return found

    def token(self, form):
        """(status, decoded JSON) of a token endpoint call as this public client (`client_id` in the form)."""
        sent = {"client_id": self.client_id, **form}
        status, _, text = self.server.request("POST", "/auth/v1/oauth/token", form=sent)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def exchange(self, code, verifier):
        return self.token({"grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
                           "code_verifier": verifier})

    def check_tokens(self, tokens, email, nonce=None, what="the tokens"):
        """The token answer holds a bearer access token of this client, a refresh token and an id token signed by a
        key of the JWKS, naming the user; userinfo with the access token names the same user. The id token's
        claims."""
        c = self.check
        c(isinstance(tokens, dict) and tokens.get("access_token") and tokens.get("refresh_token"),
          f"{what}: no access and refresh token: {tokens}")
        c.equal(str(tokens.get("token_type")).lower(), "bearer", f"{what}: token_type")
        access = jwt_claims(tokens["access_token"])
        c.equal(access.get("client_id"), self.client_id, f"{what}: the access token's client_id")
        c(tokens.get("id_token"), f"{what}: no id_token under the openid scope: {tokens}")
        status, jwks = self.server.api("GET", self.discovery["jwks_uri"])
        c(status == 200 and (jwks or {}).get("keys"), f"the JWKS answered {status}: {jwks}")
        try:
            claims = jose_jwt.decode(tokens["id_token"], JsonWebKey.import_key_set(jwks))
            claims.validate()
        except Exception as error:
            raise CheckFailed(f"{what}: the id token does not verify against the JWKS: {error!r}") from None
        c.equal(claims.get("iss"), self.issuer, f"{what}: the id token's iss")
        audience = claims.get("aud")
        c(audience == self.client_id or (isinstance(audience, list) and self.client_id in audience),
          f"{what}: the id token's aud {audience!r} does not name {self.client_id}")
        if nonce is not None:
            c.equal(claims.get("nonce"), nonce, f"{what}: the id token's nonce")
        status, info = self.server.api("GET", "/auth/v1/oauth/userinfo", token=tokens["access_token"])
        c(status == 200 and isinstance(info, dict), f"{what}: userinfo answered {status}: {info}")
        c.equal(info.get("sub"), claims.get("sub"), f"{what}: userinfo's sub against the id token's")
        c.equal(info.get("email"), email, f"{what}: userinfo's email")
        return claims


def consent_page(browser, check, app, email, scopes):
    """The consent page names the client, the signed-in user and the scopes in words, with Allow and Deny."""
    check(urllib.parse.urlsplit(browser.driver.current_url).path == "/account/authorize",
          f"the consent page is at {browser.driver.current_url}, not /account/authorize")
    check(app.name in browser.text("h1"), f"the consent page's <h1> {browser.text('h1')!r} does not name {app.name!r}")
    check.equal(browser.text("#consent-email"), email, "#consent-email")
    shown = [li.text.strip() for li in browser.css("ul#consent-scopes li")]
    check.equal(shown, scopes, "the scopes in ul#consent-scopes")
    check.equal(browser.text("#consent-approve"), "Allow", "the Allow button")
    check.equal(browser.text("#consent-deny"), "Deny", "the Deny button")


def leave_for_app(browser, app, selector, what):
    """TAB to a consent button and press ENTER: the answer sends the browser to the client's redirect URI."""
    browser.tab_to(selector)
    ActionChains(browser.driver).send_keys(Keys.ENTER).perform()
    return app.landed(browser, what)


def oauth_shots(browser, name):
    """NAME-light.png and NAME-dark.png of the page as it is: a second state of a page `audit` shoots once."""
    if not browser.shots:
        return
    browser.driver.execute_script("if (document.activeElement) document.activeElement.blur(); scrollTo(0, 0)")
    for scheme in ("light", "dark"):
        browser.color_scheme(scheme)
        browser.screenshot(os.path.join(browser.shots, f"{name}-{scheme}.png"))
    browser.color_scheme("light")


SCOPE_WORDS = ["Know who you are", "See your email address", "See your name and picture"]


def test_oauth_consent(server, browser, check):
    """An app sends the browser to /auth/v1/oauth/authorize: signed out, Gatehouse's consent page sends it through
    sign-in and back; Deny lands on the app with access_denied, Allow with code, state and iss; the app's backend
    exchanges the code under PKCE for tokens (the id token verified against the JWKS) and reads userinfo; a code is
    exchanged once; asked again, the remembered consent lands on the app at once."""
    own_address(browser, "10.42.0.1")
    email = "oauth-consent@example.com"
    server.sign_up(check, email, PASSWORD)
    app = OAuthApp(server, check, "Acme Notes", ["authorization_code", "refresh_token"])

    # Signed out: the consent page sends the browser to sign in, and the sign-in brings it back.
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(12)
    browser.driver.get(app.authorize_url(challenge, state))
    browser.expect("sign-in")
    browser.audit("sign-in", shots=False)
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", "oauth-consent")
    consent_page(browser, check, app, email, SCOPE_WORDS)
    check(not browser.css("#consent-device"), "an app's consent page carries the device warning")
    browser.audit("oauth-consent")

    # Deny: the app hears access_denied, with its state.
    found = leave_for_app(browser, app, "#consent-deny", "Deny")
    check.equal(found.get("error"), "access_denied", "the error after Deny")
    check.equal(found.get("state"), state, "the state after Deny")
    check("code" not in found, f"Deny gave a code: {browser.driver.current_url}")

    # Again, signed in now: the consent page at once; Allow gives a code.
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(12)
    nonce = secrets.token_urlsafe(12)
    browser.driver.get(app.authorize_url(challenge, state, nonce=nonce))
    browser.expect("oauth-consent")
    consent_page(browser, check, app, email, SCOPE_WORDS)
    found = leave_for_app(browser, app, "#consent-approve", "Allow")
    check(found.get("code"), f"Allow gave no code: {browser.driver.current_url}")
    check.equal(found.get("state"), state, "the state after Allow")
    check.equal(found.get("iss"), app.issuer, "the iss after Allow (RFC 9207)")
    check("error" not in found, f"Allow landed with an error: {browser.driver.current_url}")

    status, wrong = app.exchange(found["code"], pkce_pair()[0])
    check(status == 400 and (wrong or {}).get("error") == "invalid_grant",
          f"the code with another verifier answered {status}: {wrong}")
    # Whether a refused verifier spends the code is the server's choice: a new request, which the consent given
    # just now answers at once, without the page.
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(12)
    try:
        browser.driver.get(app.authorize_url(challenge, state, nonce=nonce))
    except WebDriverException as error:
        # The app listens nowhere: the navigation the driver waited for ends in a refused connection there.
        check("ERR_CONNECTION_REFUSED" in error.msg, f"opening the authorization URL again: {error.msg}")
    found = app.landed(browser, "the remembered consent")
    check(found.get("code") and found.get("state") == state,
          f"the remembered consent did not land on the app with a code: {browser.driver.current_url}")
    status, tokens = app.exchange(found["code"], verifier)
    check(status == 200, f"exchanging the code answered {status}: {tokens}")
    app.check_tokens(tokens, email, nonce=nonce, what="the code's tokens")
    status, refreshed = app.token({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]})
    check(status == 200 and (refreshed or {}).get("access_token"), f"the refresh answered {status}: {refreshed}")

    # The code a second time: refused, and the session it made ends (OAuth 2.1 §4.1.3).
    status, again = app.exchange(found["code"], verifier)
    check(status == 400 and (again or {}).get("error") == "invalid_grant",
          f"the same code exchanged twice answered {status}: {again}")
    status, info = server.api("GET", "/auth/v1/oauth/userinfo", token=refreshed["access_token"])
    check.equal(status, 401, f"userinfo with the replayed code's refreshed token ({info})")


def test_oauth_step_up(server, browser, check):
    """An app asking for acr_values=aal2: without an authenticator app the page says how to get one; with one, the
    browser signs in, goes through the second-factor page and back to consent; the tokens say aal2."""
    own_address(browser, "10.42.0.2")
    email = "oauth-step-up@example.com"
    session = server.sign_up(check, email, PASSWORD)
    app = OAuthApp(server, check, "Acme Payroll", ["authorization_code", "refresh_token"])
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(12)
    browser.driver.get(app.authorize_url(challenge, state, acr_values="aal2"))
    browser.expect("sign-in")
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", "oauth-second-factor")
    consent_url = browser.driver.current_url
    check(bool(browser.text("main p")), "the page for a missing second factor says nothing")
    browser.audit("oauth-second-factor")

    # An authenticator app, added through the API; the same request now asks for its code.
    token = session["access_token"]
    status, factor = server.api("POST", "/auth/v1/factors", {"factor_type": "totp", "friendly_name": "Phone"},
                                token=token)
    check(status == 200 and factor.get("id"), f"enrolling a factor answered {status}: {factor}")
    phone = Authenticator(pyotp.TOTP(factor["totp"]["secret"]).provisioning_uri(name=email))
    status, challenged = server.api("POST", f"/auth/v1/factors/{factor['id']}/challenge", {}, token=token)
    check(status == 200 and challenged.get("id"), f"the factor's challenge answered {status}: {challenged}")
    status, verified = server.api("POST", f"/auth/v1/factors/{factor['id']}/verify",
                                  {"challenge_id": challenged["id"], "code": phone.code()}, token=token)
    check(status == 200, f"verifying the factor answered {status}: {verified}")

    # A factor turned on ends the account's sessions below aal2 (as GoTrue): the request signs in again, then asks
    # for the app's code.
    browser.open(consent_url, "sign-in")
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", "second-factor")
    check.equal(urllib.parse.urlsplit(browser.driver.current_url).path, "/account/second-factor",
                "the step-up's page")
    browser.audit("second-factor", shots=False)
    browser.type_into("form#second-factor-form input#code", phone.code())
    browser.press_on("form#second-factor-form [type=submit]", "oauth-consent")
    consent_page(browser, check, app, email, SCOPE_WORDS)
    browser.audit("oauth-consent", shots=False)
    found = leave_for_app(browser, app, "#consent-approve", "Allow after the second factor")
    check(found.get("code") and found.get("state") == state, f"Allow landed on {browser.driver.current_url}")
    status, tokens = app.exchange(found["code"], verifier)
    check(status == 200, f"exchanging the code answered {status}: {tokens}")
    claims = app.check_tokens(tokens, email, what="the aal2 tokens")
    check.equal(jwt_claims(tokens["access_token"]).get("aal"), "aal2", "the access token's aal")
    check.equal(claims.get("acr"), "aal2", "the id token's acr")


def test_oauth_device(server, browser, check):
    """A device asks for a code; its person, signed out, opens the verification URI, signs in, types the code by
    keyboard (a wrong one first, which the page refuses in words), allows the device on the consent page and reads
    "Device connected"; the device's poll then gets tokens."""
    own_address(browser, "10.42.0.3")
    email = "oauth-device@example.com"
    server.sign_up(check, email, PASSWORD)
    app = OAuthApp(server, check, "Acme TV", [DEVICE_GRANT, "refresh_token"])
    status, _, text = server.request("POST", "/auth/v1/oauth/device_authorization",
                                     form={"client_id": app.client_id, "scope": "openid email"})
    device = json.loads(text) if status == 200 else {}
    check(status == 200, f"device_authorization answered {status}: {text[:300]}")
    user_code = device.get("user_code") or ""
    check(re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", user_code),
          f"the user_code {user_code!r} is not like BCDF-GHJK")
    check.equal(device.get("verification_uri"), server.base + "/account/device", "verification_uri")
    check(device.get("device_code") and (device.get("verification_uri_complete") or "").startswith(
        server.base + "/account/device?"), f"the device answer: {device}")
    interval = int(device.get("interval") or 5)

    def poll():
        return app.token({"grant_type": DEVICE_GRANT, "device_code": device["device_code"]})

    status, pending = poll()
    check(status == 400 and (pending or {}).get("error") == "authorization_pending",
          f"polling before the person acted answered {status}: {pending}")
    polled = time.monotonic()

    browser.open(device["verification_uri"], "sign-in")
    browser.type_into("form#password-sign-in input#email", email)
    browser.type_into("form#password-sign-in input#password", PASSWORD)
    browser.press_on("form#password-sign-in [type=submit]", "oauth-device")
    check.equal(urllib.parse.urlsplit(browser.driver.current_url).path, "/account/device", "the page after sign-in")
    check.equal(browser.one("input#user_code").get_attribute("value"), "", "input#user_code on the bare page")
    browser.audit("oauth-device")

    wrong = "".join("BCDFGHJKLMNPQRSTVWXZ"[("BCDFGHJKLMNPQRSTVWXZ".index(ch) + 1) % 20] if ch != "-" else "-"
                    for ch in user_code)
    browser.type_into("form#device-form input#user_code", wrong)
    browser.press_on("form#device-form [type=submit]", "oauth-device")
    check(bool(browser.text("#device-error")), "a wrong code shows an empty #device-error")
    field = browser.one("input#user_code")
    check("device-error" in (field.get_attribute("aria-describedby") or "").split(),
          "input#user_code's aria-describedby does not name #device-error")
    check.equal(field.get_attribute("aria-invalid"), "true", "input#user_code's aria-invalid after a wrong code")
    browser.audit("oauth-device", shots=False)
    oauth_shots(browser, "oauth-device-error")

    # The right code, as a person types it off a screen: lowercase, without the dash.
    browser.type_into("form#device-form input#user_code", user_code.replace("-", "").lower())
    browser.press_on("form#device-form [type=submit]", "oauth-consent")
    consent_page(browser, check, app, email, SCOPE_WORDS[:2])
    check(browser.text("#consent-device").startswith("Allow only a device you are setting up yourself"),
          "the device's consent page does not warn about a code sent by someone else (RFC 8628 §5.4)")
    browser.audit("oauth-consent", shots=False)
    oauth_shots(browser, "oauth-consent-device")
    browser.press_on("#consent-approve", "oauth-device-done")
    check.equal(browser.text("h1"), "Device connected", "the page after allowing the device")
    browser.audit("oauth-device-done")

    # The device polls at its interval until the tokens come (RFC 8628 §3.5: slow_down adds to the interval).
    end = time.monotonic() + WAIT + 2 * interval
    while True:
        time.sleep(max(0.0, polled + interval - time.monotonic()))  # the protocol's pace, not a wait for state
        status, tokens = poll()
        polled = time.monotonic()
        error = (tokens or {}).get("error") if isinstance(tokens, dict) else None
        if status == 200 or error not in ("authorization_pending", "slow_down") or polled > end:
            break
        if error == "slow_down":
            interval += 5
    check(status == 200, f"the device's poll after Allow answered {status}: {tokens}")
    app.check_tokens(tokens, email, what="the device's tokens")
    status, spent = poll()
    check(status == 400 and (spent or {}).get("error") in ("invalid_grant", "expired_token"),
          f"polling again after the tokens answered {status}: {spent}")


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
    test_provider_sign_in,
    test_link_identity,
    test_saml_sign_in,
    test_invitation_acceptance,
    test_console,
    test_oauth_consent,
    test_oauth_step_up,
    test_oauth_device,
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--shots", default=None)
    parser.add_argument("only", nargs="*", help="test names to run, with or without test_ (default: all)")
    args = parser.parse_args()
    # A TERM ends the run through the tests' `finally`, which quits each browser.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = Server(args.base, args.data_dir, args.binary)
    only = {name.removeprefix("test_") for name in args.only}
    unknown = only - {t.__name__.removeprefix("test_") for t in TESTS}
    if unknown:
        parser.error(f"no such test: {', '.join(sorted(unknown))}")
    tests = [t for t in TESTS if not only or t.__name__.removeprefix("test_") in only]
    sys.exit(run(tests, server, args.shots))


if __name__ == "__main__":
    main()
