#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
    import AuthenticationServices
    import Foundation

    /// A provider's sign-in page in the system's browser sheet (`ASWebAuthenticationSession`), which returns to the
    /// app at its URL scheme. The app registers nothing for the scheme: the sheet catches the redirect itself.
    public struct PlatformWebAuthenticator: WebAuthenticator {
        private let anchor: @MainActor @Sendable () -> ASPresentationAnchor
        private let ephemeral: Bool

        /// An authenticator that shows the sheet over the window `presentationAnchor` answers. With
        /// `prefersEphemeralWebBrowserSession`, the page shares no cookies with Safari (no account already signed in
        /// at the provider, and the system asks no consent to share them) and keeps none.
        public init(
            prefersEphemeralWebBrowserSession: Bool = false,
            presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor
        ) {
            anchor = presentationAnchor
            ephemeral = prefersEphemeralWebBrowserSession
        }

        /// Shows `url` until the browser is sent to `callbackScheme`, and answers that URL.
        public func authenticate(url: URL, callbackScheme: String) async throws -> URL {
            try await WebAuthenticationCeremony.run(
                url: url, callbackScheme: callbackScheme, ephemeral: ephemeral, anchor: anchor)
        }
    }

    /// One `ASWebAuthenticationSession` run, its completion bridged to async. The session is held here until it ends;
    /// the running method holds the ceremony.
    @MainActor
    private final class WebAuthenticationCeremony: NSObject, ASWebAuthenticationPresentationContextProviding {
        private let anchor: ASPresentationAnchor
        private var session: ASWebAuthenticationSession?
        private var continuation: CheckedContinuation<URL, any Error>?

        private init(anchor: ASPresentationAnchor) { self.anchor = anchor }

        /// Shows the sheet over `anchor` and answers the URL it returned with, or throws `PasskeyAuthenticatorError`
        /// (`cancelled` when the sheet is closed or the task cancelled).
        static func run(
            url: URL, callbackScheme: String, ephemeral: Bool, anchor: @MainActor @Sendable () -> ASPresentationAnchor
        ) async throws -> URL {
            try await WebAuthenticationCeremony(anchor: anchor()).run(
                url: url, callbackScheme: callbackScheme, ephemeral: ephemeral)
        }

        private func run(url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    self.continuation = continuation
                    let session = ASWebAuthenticationSession(url: url, callbackURLScheme: callbackScheme) {
                        [weak self] callback, error in
                        // The session may call back on any thread: the answer is read on the main actor.
                        let answer = Self.answer(callback: callback, error: error)
                        Task { @MainActor in self?.finish(answer) }
                    }
                    session.presentationContextProvider = self
                    session.prefersEphemeralWebBrowserSession = ephemeral
                    self.session = session
                    if !session.start() {
                        finish(.failure(PasskeyAuthenticatorError.failed("The sign-in page could not be shown")))
                    }
                }
            } onCancel: {
                // Whether or not the session calls back on `cancel()`, the run ends here, once.
                Task { @MainActor in
                    self.session?.cancel()
                    self.finish(.failure(PasskeyAuthenticatorError.cancelled))
                }
            }
        }

        private func finish(_ answer: Result<URL, any Error>) {
            continuation?.resume(with: answer)
            continuation = nil
            session = nil
        }

        /// What the session's completion means to the app: a closed sheet is `cancelled`.
        private nonisolated static func answer(callback: URL?, error: (any Error)?) -> Result<URL, any Error> {
            if let callback { return .success(callback) }
            guard let error = error as? ASWebAuthenticationSessionError else {
                return .failure(PasskeyAuthenticatorError.failed(error?.localizedDescription ?? "No URL came back"))
            }
            if error.code == .canceledLogin { return .failure(PasskeyAuthenticatorError.cancelled) }
            return .failure(PasskeyAuthenticatorError.failed(error.localizedDescription))
        }

        // The requirement is not isolated to the main actor, but the session asks for the anchor on it.
        nonisolated func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
            MainActor.assumeIsolated { anchor }
        }
    }
#endif
